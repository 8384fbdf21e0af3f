#include "cli/tag_resolution.h"

#include "core/errors.h"
#include "kube/config.h"
#include "kube/errors.h"
#include "log/log.h"

namespace ncclguard::cli {
namespace {

constexpr std::string_view kDockerConfigJson = "kubernetes.io/dockerconfigjson";
constexpr std::string_view kDockerCfg = "kubernetes.io/dockercfg";

}  // namespace

namespace {

// A Secret read while a pod waits for its admission: a second at most, no 429 retries (the
// webhook's own timeout is 5 s, and the registry gets its budget after this).
kube::ClientOptions SecretReads() {
  kube::ClientOptions options;
  options.request_timeout = std::chrono::milliseconds(1000);
  options.max_retries_on_429 = 0;
  return options;
}

}  // namespace

PullSecrets::PullSecrets(kube::ClientConfig config, std::chrono::seconds ttl)
    : client_(std::move(config), SecretReads()), ttl_(ttl) {}

PullSecrets::Entry PullSecrets::Read(const std::string& namespace_, const std::string& name) {
  const std::string key = namespace_ + "/" + name;
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mutex_);
    const auto found = cache_.find(key);
    if (found != cache_.end() && found->second.expires > now) return found->second;
  }
  Entry entry;
  entry.expires = now + ttl_;
  try {
    kube::ResourceRef ref{"", "v1", "secrets", true, namespace_, name};
    const core::Json secret = client_.Get(ref);
    const std::string type = secret.value("type", "");
    const char* field = type == kDockerConfigJson ? ".dockerconfigjson"
                        : type == kDockerCfg      ? ".dockercfg"
                                                  : nullptr;
    const auto data = secret.find("data");
    if (field == nullptr) {
      entry.problem = "Secret " + name + " is of type " + type + ", not a docker config";
    } else if (data == secret.end() || !data->is_object() || !data->contains(field) ||
               !(*data)[field].is_string()) {
      entry.problem = "Secret " + name + " has no " + field;
    } else {
      entry.credentials = webhook::ReadDockerConfig(
          kube::DecodeBase64((*data)[field].get<std::string>(), "Secret " + name));
    }
  } catch (const kube::ApiError& e) {
    entry.problem = "Secret " + name + " not read (" + e.what() + ")";
  } catch (const std::exception& e) {  // InputError, ConfigError: never a secret's value
    entry.problem = "Secret " + name + " unreadable (" + e.what() + ")";
  }
  if (!entry.problem.empty()) {
    log::Warn("a pull secret gives no credentials for resolving tags",
              {{"namespace", namespace_}, {"problem", entry.problem}});
  }
  std::lock_guard lock(mutex_);
  if (cache_.size() >= kMaxCached) {
    for (auto it = cache_.begin(); it != cache_.end();) {
      it = it->second.expires <= now ? cache_.erase(it) : std::next(it);
    }
    if (cache_.size() >= kMaxCached) cache_.erase(cache_.begin());
  }
  cache_.insert_or_assign(key, entry);
  return entry;
}

std::vector<webhook::RegistryCredential> PullSecrets::For(const core::Json& pod,
                                                          std::string_view namespace_,
                                                          std::string& why) {
  std::vector<webhook::RegistryCredential> credentials;
  const auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return credentials;
  const auto secrets = spec->find("imagePullSecrets");
  if (secrets == spec->end() || !secrets->is_array()) return credentials;
  std::size_t read = 0;
  for (const core::Json& secret : *secrets) {
    if (read == kMaxPullSecrets) break;
    const std::string name = secret.is_object() ? secret.value("name", "") : "";
    if (name.empty()) continue;
    ++read;
    const Entry entry = Read(std::string(namespace_), name);
    if (!entry.problem.empty()) why = entry.problem;
    credentials.insert(credentials.end(), entry.credentials.begin(), entry.credentials.end());
  }
  return credentials;
}

std::optional<std::string> TagResolution::operator()(const core::ImageReference& image,
                                                     const core::Json& pod,
                                                     std::string_view namespace_,
                                                     std::string& why) const {
  std::string secrets_problem;
  const std::vector<webhook::RegistryCredential> credentials =
      secrets->For(pod, namespace_, secrets_problem);
  const webhook::Resolution resolution = resolver->Resolve(image, credentials);
  if (resolution.status == webhook::ResolveStatus::Resolved) return resolution.digest;
  why = std::string(webhook::ResolveStatusName(resolution.status)) + ": " + resolution.why;
  if (!secrets_problem.empty()) why += "; " + secrets_problem;
  return std::nullopt;
}

}  // namespace ncclguard::cli
