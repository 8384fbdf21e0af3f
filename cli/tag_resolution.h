// The webhook's resolution of a job's image tags at admission (`ncclguard controller
// --resolve-digests`; docs/operator.md "Resolving the tag at admission"): the credentials of a
// pod's imagePullSecrets, read from the API server and kept a minute, handed with the image to
// webhook::DigestResolver. Off unless the flag asks: it needs get on Secrets.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/image_ref.h"
#include "core/json.h"
#include "kube/client.h"
#include "webhook/digest_resolver.h"

namespace ncclguard::cli {

// The registry credentials of a pod's spec.imagePullSecrets (at most kMaxPullSecrets of them),
// each Secret read once a `ttl`, within a second (a Secret that is missing, of another type or
// unreadable counts as none, and is said in `why`).
class PullSecrets {
 public:
  static constexpr std::size_t kMaxPullSecrets = 8;
  static constexpr std::size_t kMaxCached = 1024;
  PullSecrets(kube::ClientConfig config, std::chrono::seconds ttl = std::chrono::seconds(60));
  std::vector<webhook::RegistryCredential> For(const core::Json& pod, std::string_view namespace_,
                                               std::string& why);

 private:
  struct Entry {
    std::vector<webhook::RegistryCredential> credentials;
    std::string problem;
    std::chrono::steady_clock::time_point expires;
  };
  Entry Read(const std::string& namespace_, const std::string& name);

  kube::Client client_;
  std::chrono::seconds ttl_;
  std::mutex mutex_;
  std::map<std::string, Entry> cache_;  // "<namespace>/<name>"
};

// What AdmitOptions::resolve_digest asks, over one resolver and one PullSecrets.
struct TagResolution {
  std::shared_ptr<webhook::DigestResolver> resolver;
  std::shared_ptr<PullSecrets> secrets;

  std::optional<std::string> operator()(const core::ImageReference& image, const core::Json& pod,
                                        std::string_view namespace_, std::string& why) const;
};

}  // namespace ncclguard::cli
