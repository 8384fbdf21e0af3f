#include "manager/webhook_cert_manager.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "core/json.h"
#include "kube/errors.h"
#include "log/log.h"

namespace ncclguard::manager {
namespace {

using core::Json;

std::string EncodeBase64(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int length = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                     reinterpret_cast<const unsigned char*>(bytes.data()),
                                     static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(std::max(length, 0)));
  return out;
}

kube::ResourceRef SecretRef(const WebhookCertOptions& options) {
  return kube::ResourceRef{"", "v1", "secrets", true, options.namespace_, options.secret_name};
}

kube::ResourceRef ConfigurationRef(const std::string& resource, const std::string& name) {
  return kube::ResourceRef{"admissionregistration.k8s.io", "v1", resource, false, "", name};
}

// The Secret's data decoded; throws CertError for a value that is not base64.
std::map<std::string, std::string> DecodeData(const Json& secret) {
  std::map<std::string, std::string> data;
  auto found = secret.find("data");
  if (found == secret.end() || found->is_null()) return data;
  if (!found->is_object()) throw CertError("the Secret's data is not a map");
  for (const auto& [key, value] : found->items()) {
    if (!value.is_string()) throw CertError("the Secret's data." + key + " is not a string");
    try {
      data[key] = kube::DecodeBase64(value.get<std::string>(), "data." + key);
    } catch (const kube::ConfigError& e) {
      throw CertError(std::string("the Secret's ") + e.what());
    }
  }
  return data;
}

Json EncodeData(const std::map<std::string, std::string>& data) {
  Json encoded = Json::object();
  for (const auto& [key, value] : data) encoded[key] = EncodeBase64(value);
  return encoded;
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Written next to its final name and renamed over it, so a reader sees the old or the new file,
// never half of one.
void WriteAtomically(const std::string& path, const std::string& content, mode_t mode) {
  const std::string temporary = path + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) throw CertError("writing " + temporary + ": " + std::strerror(errno));
  // The umask or an older temporary file must not widen a key's mode.
  if (::fchmod(fd, mode) != 0) {
    const std::string error = std::strerror(errno);
    ::close(fd);
    throw CertError("setting the mode of " + temporary + ": " + error);
  }
  std::size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string error = std::strerror(errno);
      ::close(fd);
      throw CertError("writing " + temporary + ": " + error);
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    throw CertError("writing " + temporary + ": " + std::strerror(errno));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    throw CertError("renaming " + temporary + " to " + path + ": " + std::strerror(errno));
  }
}

}  // namespace

Json NewCertSecret(const WebhookCertOptions& options,
                   const std::map<std::string, std::string>& data) {
  Json object = {{"apiVersion", "v1"},
                 {"kind", "Secret"},
                 {"metadata",
                  {{"name", options.secret_name},
                   {"namespace", options.namespace_},
                   {"labels",
                    {{"app.kubernetes.io/name", "ncclguard"},
                     {"app.kubernetes.io/component", "webhook-certificates"}}}}},
                 {"type", "kubernetes.io/tls"},
                 {"data", EncodeData(data)}};
  kube::AddOwnerReference(object, options.owner);
  return object;
}

WebhookCertManager::WebhookCertManager(kube::Client client, WebhookCertOptions options)
    : client_(std::move(client)), options_(std::move(options)) {
  if (options_.secret_name.empty()) throw CertError("the certificate Secret needs a name");
  if (options_.namespace_.empty()) throw CertError("the certificate Secret needs a namespace");
  if (options_.service_name.empty()) throw CertError("--webhook-service must not be empty");
  const CertLifetimes& lifetimes = options_.lifetimes;
  if (lifetimes.serving_validity.count() <= 0 ||
      lifetimes.ca_validity <= lifetimes.ca_rollover_before) {
    throw CertError("certificate lifetimes: the CA must outlive its rollover period");
  }
  hosts_ = ServiceHosts(options_.service_name, options_.namespace_, options_.extra_hosts);
  CheckHosts(hosts_);
}

std::int64_t WebhookCertManager::Now() const {
  if (options_.now) return options_.now();
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string WebhookCertManager::cert_file() const {
  return (std::filesystem::path(options_.cert_dir) / kTlsCertKey).string();
}

std::string WebhookCertManager::key_file() const {
  return (std::filesystem::path(options_.cert_dir) / kTlsKeyKey).string();
}

std::string WebhookCertManager::ca_bundle() const {
  std::lock_guard lock(mutex_);
  return bundle_;
}

bool WebhookCertManager::WaitUntilReady(const kube::StopToken& stop) const {
  while (!CertificateReady()) {
    if (stop.WaitFor(std::chrono::milliseconds(50))) return CertificateReady();
  }
  return true;
}

void WebhookCertManager::SyncOnce() {
  const kube::ResourceRef ref = SecretRef(options_);
  for (int attempt = 0;; ++attempt) {
    std::optional<Json> secret;
    try {
      secret = client_.Get(ref);
    } catch (const kube::ApiError& e) {
      if (e.code() != kube::ErrorCode::kNotFound) throw;
    }

    std::map<std::string, std::string> data;
    CertDecision decision{CertAction::kCreate, "no Secret " + ref.Describe() + " yet"};
    if (secret) {
      try {
        data = DecodeData(*secret);
        CertState state = ParseCertSecret(data);
        const bool published = EnsureBundle(data.at(kCaCertKey));
        decision = DecideCertAction(state, Now(), published, hosts_, options_.lifetimes);
      } catch (const CertError& e) {
        log::Warn(
            "webhook certificate Secret is unusable; replacing it with a new CA and serving "
            "certificate",
            {{"secret", ref.Describe()}, {"error", e.what()}});
        decision = {CertAction::kCreate, std::string("unusable Secret: ") + e.what()};
      }
    }

    if (decision.action != CertAction::kNone) {
      std::map<std::string, std::string> updated =
          ApplyCertAction(decision, data, Now(), hosts_, options_.lifetimes);
      try {
        if (!secret) {
          client_.Create(ref.Named("").In(options_.namespace_), NewCertSecret(options_, updated));
        } else {
          Json object = *secret;
          object["data"] = EncodeData(updated);
          kube::AddOwnerReference(object, options_.owner);
          client_.Update(ref, object);
        }
      } catch (const kube::ApiError& e) {
        // Another replica wrote first: use what it wrote.
        const bool lost_race =
            e.code() == kube::ErrorCode::kAlreadyExists || e.code() == kube::ErrorCode::kConflict;
        if (lost_race && attempt < 5) continue;
        throw;
      }
      log::Info("webhook certificates updated", {{"secret", ref.Describe()},
                                                 {"action", CertActionName(decision.action)},
                                                 {"reason", decision.reason}});
      data = std::move(updated);
      EnsureBundle(data.at(kCaCertKey));
    } else if (Json object = *secret; kube::AddOwnerReference(object, options_.owner)) {
      // A Secret from before owner references (an upgraded install): only the owner added.
      try {
        client_.Update(ref, object);
      } catch (const kube::ApiError& e) {
        if (e.code() == kube::ErrorCode::kConflict && attempt < 5) continue;
        throw;
      }
      log::Info("webhook certificate Secret owner reference added",
                {{"secret", ref.Describe()}, {"owner", options_.owner->ToJson()}});
    } else {
      log::Debug("webhook certificates current",
                 {{"secret", ref.Describe()}, {"reason", decision.reason}});
    }
    WriteFiles(data.at(kTlsCertKey), data.at(kTlsKeyKey), /*from_secret=*/true);
    ReportCaExpiry(data.at(kCaCertKey));
    OPENSSL_cleanse(data.at(kTlsKeyKey).data(), data.at(kTlsKeyKey).size());
    OPENSSL_cleanse(data.at(kCaKeyKey).data(), data.at(kCaKeyKey).size());
    return;
  }
}

void WebhookCertManager::ReportCaExpiry(const std::string& bundle_pem) {
  std::int64_t newest = 0;
  try {
    for (const CertFacts& ca : InspectCertificates(bundle_pem, "CA bundle")) {
      newest = std::max(newest, ca.not_after);
    }
  } catch (const CertError&) {
    return;  // checked by ParseCertSecret already
  }
  (options_.metrics != nullptr ? *options_.metrics : Metrics::Process()).SetWebhookCaExpiry(newest);
}

bool WebhookCertManager::EnsureBundle(const std::string& bundle_pem) {
  {
    std::lock_guard lock(mutex_);
    bundle_ = bundle_pem;
  }
  const std::string encoded = EncodeBase64(bundle_pem);
  bool all_current = true;
  for (const char* resource :
       {"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}) {
    const kube::ResourceRef ref = ConfigurationRef(resource, options_.configuration_name);
    for (int attempt = 0;; ++attempt) {
      Json configuration;
      try {
        configuration = client_.Get(ref);
      } catch (const kube::ApiError& e) {
        if (e.code() != kube::ErrorCode::kNotFound) throw;
        // Nothing calls the webhook through a configuration that does not exist; it gets the
        // bundle on a later pass once it is created.
        const std::string name = ref.Describe();
        if (std::find(missing_configurations_.begin(), missing_configurations_.end(), name) ==
            missing_configurations_.end()) {
          missing_configurations_.push_back(name);
          log::Warn("webhook configuration not found; its caBundle is set once it exists",
                    {{"configuration", name}});
        }
        break;
      }
      std::erase(missing_configurations_, ref.Describe());
      Json webhooks = Json::array();
      for (const Json& webhook : configuration.value("webhooks", Json::array())) {
        const Json* client_config =
            webhook.contains("clientConfig") ? &webhook.at("clientConfig") : nullptr;
        const std::string current = client_config != nullptr
                                        ? client_config->value("caBundle", std::string())
                                        : std::string();
        if (current == encoded || !webhook.contains("name")) continue;
        webhooks.push_back(
            {{"name", webhook.at("name")}, {"clientConfig", {{"caBundle", encoded}}}});
      }
      if (webhooks.empty()) break;
      all_current = false;
      // Strategic merge by webhook name sets only caBundle; the resourceVersion makes it fail
      // with Conflict if the configuration changed since it was read.
      const Json patch = {
          {"metadata", {{"resourceVersion", kube::ResourceVersionOf(configuration)}}},
          {"webhooks", webhooks}};
      try {
        client_.Patch(ref, kube::PatchType::kStrategic, patch);
      } catch (const kube::ApiError& e) {
        if (e.code() == kube::ErrorCode::kConflict && attempt < 5) continue;
        throw;
      }
      log::Info("webhook configuration caBundle set",
                {{"configuration", ref.Describe()}, {"webhooks", webhooks.size()}});
      break;
    }
  }
  return all_current;
}

void WebhookCertManager::WritePlaceholderIfMissing() {
  std::error_code error;
  if (std::filesystem::exists(cert_file(), error) && std::filesystem::exists(key_file(), error)) {
    return;
  }
  CertLifetimes placeholder;
  placeholder.ca_validity = std::chrono::hours(48);
  placeholder.ca_rollover_before = std::chrono::hours(1);
  placeholder.serving_validity = std::chrono::hours(24);
  auto data = ApplyCertAction({CertAction::kCreate, "placeholder"}, {}, Now(), hosts_, placeholder);
  WriteFiles(data.at(kTlsCertKey), data.at(kTlsKeyKey), /*from_secret=*/false);
  OPENSSL_cleanse(data.at(kTlsKeyKey).data(), data.at(kTlsKeyKey).size());
  OPENSSL_cleanse(data.at(kCaKeyKey).data(), data.at(kCaKeyKey).size());
}

void WebhookCertManager::WriteFiles(const std::string& cert_pem, const std::string& key_pem,
                                    bool from_secret) {
  std::error_code error;
  std::filesystem::create_directories(options_.cert_dir, error);
  if (error) throw CertError("creating " + options_.cert_dir + ": " + error.message());
  // Unchanged files are left alone: rewriting them would make the server reload for nothing.
  // The key first: until the certificate follows, the server keeps the pair it has.
  std::string on_disk = ReadFileOrEmpty(key_file());
  bool changed = on_disk != key_pem;
  if (changed) WriteAtomically(key_file(), key_pem, 0600);
  OPENSSL_cleanse(on_disk.data(), on_disk.size());
  if (ReadFileOrEmpty(cert_file()) != cert_pem) {
    WriteAtomically(cert_file(), cert_pem, 0644);
    changed = true;
  }
  if (changed && options_.files_written) options_.files_written();
  if (from_secret && !ready_.exchange(true)) {
    log::Info("webhook serving certificate written",
              {{"certFile", cert_file()}, {"hosts", hosts_}});
  }
}

void WebhookCertManager::Run(const kube::StopToken& stop) {
  const log::Scope log_scope(
      {{"key", "Secret/" + options_.namespace_ + "/" + options_.secret_name}});
  while (!stop.stopped()) {
    std::chrono::milliseconds wait = options_.sync_interval;
    try {
      SyncOnce();
      // A webhook configuration created after this replica's sync (Helm creates them after the
      // Deployment) has no caBundle, and the API server refuses this replica's certificate
      // until it gets one: look again soon, not a whole sync interval later.
      if (!missing_configurations_.empty()) wait = options_.retry_interval;
    } catch (const std::exception& e) {
      wait = options_.retry_interval;
      log::Warn("webhook certificates not synced; retrying",
                {{"secret", SecretRef(options_).Describe()}, {"error", e.what()}});
    }
    if (stop.WaitFor(wait)) break;
  }
}

std::vector<Access> WebhookCertAccess(const WebhookCertOptions& options) {
  return {
      Access("", {"secrets"}, {"create"},
             "certificate manager: the first replica creates the certificate Secret")
          .InOwnNamespace(),
      Access("", {"secrets"}, {"get", "update"},
             "certificate manager: every replica reads the Secret, a renewal rewrites it")
          .InOwnNamespace()
          .Named({options.secret_name}),
      Access("admissionregistration.k8s.io",
             {"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}, {"get", "patch"},
             "certificate manager: the caBundle of this release's two webhook configurations")
          .Named({options.configuration_name}),
  };
}

}  // namespace ncclguard::manager
