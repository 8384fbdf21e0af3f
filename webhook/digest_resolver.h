// Resolution of an image tag to its manifest digest at admission, through the OCI distribution
// API: what lets the webhook pin the very first pods of a training job, before any of them has
// reported the digest it runs (core/image_pin.h pins the later ones). Off by default; the webhook
// decides when to ask. One HEAD of the manifest, with the registry's Basic or Bearer token
// challenge answered from the pod's pull secrets, all of it inside a time budget, and answers
// cached (a hit costs a map lookup, not a round trip). docs/operator.md, "Resolving a tag at
// admission".
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/image_ref.h"

namespace ncclguard::webhook {

struct RegistryCredential {
  std::string registry;  // normalised: "docker.io", "registry.example:5000"
  std::string username;
  std::string password;
};

// The bounds of what ReadDockerConfig reads.
inline constexpr std::size_t kMaxDockerConfigBytes = 64 * 1024;
inline constexpr std::size_t kMaxDockerConfigRegistries = 256;

// The credentials of a kubernetes.io/dockerconfigjson Secret's .dockerconfigjson ({"auths":
// {"<registry>": {...}}}) or a kubernetes.io/dockercfg Secret's .dockercfg (the same map at the
// top level). Each entry gives "auth" (base64 of user:password; preferred when present) or
// "username" and "password"; other fields ("email") are ignored. A registry named twice after
// normalisation keeps its first entry. Throws core::InputError naming the entry and what is wrong
// (never a secret's value); bounded to kMaxDockerConfigBytes and kMaxDockerConfigRegistries.
std::vector<RegistryCredential> ReadDockerConfig(std::string_view bytes);

// A docker config key, or a registry as ImageReference::Registry() names it, as ncclguard
// compares registries: the scheme and any path dropped, lower-cased, Docker Hub's names
// ("https://index.docker.io/v1/", "index.docker.io", "registry-1.docker.io") as "docker.io".
// "" when nothing of a host is left.
std::string NormaliseRegistry(std::string_view key);

// One challenge of a WWW-Authenticate header (RFC 7235): `Bearer realm="...",service="..."`.
struct AuthChallenge {
  std::string scheme;                         // lower-cased: "basic", "bearer"
  std::map<std::string, std::string> params;  // names lower-cased, values unquoted
  std::string token68;                        // `Negotiate abc==`: the bare token, if any
};

// The header values a registry's answer may carry at most; past it the answer is not read.
inline constexpr std::size_t kMaxChallengeBytes = 16 * 1024;

// Reads the challenges of a WWW-Authenticate value (or of several header lines joined with ",").
// Quoted strings may hold commas and backslash escapes. nullopt when the value is longer than
// `max_bytes` or is not the header's grammar (an unterminated quote, a parameter without a
// scheme). Linear in the value's length.
std::optional<std::vector<AuthChallenge>> ParseChallenge(
    std::string_view header, std::size_t max_bytes = kMaxChallengeBytes);

struct DigestResolverOptions {
  std::chrono::milliseconds budget{1500};  // whole resolution, auth round trips included
  std::chrono::seconds ttl{300};           // a resolved digest is reused this long
  std::chrono::seconds failure_ttl{30};    // a failure is not retried for this long
  std::size_t max_entries = 4096;          // cache bound (evict oldest)
  // "127.0.0.1:5000": spoken to over http, not https (tests, in-cluster registries); the only
  // hosts credentials are ever sent to without TLS.
  std::vector<std::string> plain_http_registries;
  // A CA bundle for registries and token servers, beside the system's CA directory; "": the
  // system's bundle.
  std::string ca_file;
};

enum class ResolveStatus { Resolved, NotFound, Unauthorized, Unreachable, TimedOut, BadAnswer };
std::string_view ResolveStatusName(ResolveStatus status);  // "Resolved", "NotFound", ...

struct Resolution {
  ResolveStatus status = ResolveStatus::BadAnswer;
  std::string digest;  // "sha256:<64 hex>" when Resolved
  std::string why;     // for people: what was asked of whom and what came back; never a secret
  // Answered without a round trip of its own: from the cache, or from the resolution of the same
  // tag another caller had under way.
  bool cached = false;
};

class DigestResolver {
 public:
  explicit DigestResolver(DigestResolverOptions options);
  ~DigestResolver();
  DigestResolver(const DigestResolver&) = delete;
  DigestResolver& operator=(const DigestResolver&) = delete;

  // The manifest digest `ref`'s tag names now. `ref` must have a tag and no digest; the
  // credential used is the first of `credentials` for ref's registry (NormaliseRegistry).
  // Thread-safe; never throws; returns within options.budget (plus a few ms). Callers that ask
  // for the same tag at once share one resolution. The cache key includes which credential was
  // used (a hash of it, never the secret).
  Resolution Resolve(const core::ImageReference& ref,
                     std::span<const RegistryCredential> credentials);

 private:
  struct Flight;
  struct Entry {
    Resolution resolution;
    std::chrono::steady_clock::time_point expires;
    std::list<std::string>::iterator age;  // its place in oldest_
  };
  void Store(const std::string& key, const Resolution& resolution);
  Resolution Fetch(const std::string& registry, const std::string& repository,
                   const std::string& tag, const RegistryCredential* credential,
                   std::chrono::steady_clock::time_point deadline) noexcept;

  DigestResolverOptions options_;
  std::mutex mutex_;
  std::unordered_map<std::string, Entry> cache_;
  std::list<std::string> oldest_;  // cache keys, oldest first
  std::unordered_map<std::string, std::shared_ptr<Flight>> flights_;
  std::mutex handles_mutex_;
  std::vector<void*> idle_handles_;  // libcurl easy handles: connections kept alive
};

}  // namespace ncclguard::webhook
