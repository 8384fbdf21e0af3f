// The webhook's TLS: serving certificate from files (reloaded when a Secret rotates), TLS 1.2
// as the floor, HTTP/1.1 only via ALPN.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

using SSL_CTX = struct ssl_ctx_st;

namespace ncclguard::webhook {

class TlsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class TlsVersion { V1_2, V1_3 };

// Accepts Kubernetes' spellings (VersionTLS12, VersionTLS13) and 1.2 / 1.3; older versions
// are refused by design.
std::optional<TlsVersion> ParseTlsVersion(std::string_view text);

// A certificate chain and its private key, checked to match. Immutable once loaded.
class ServingCertificate {
 public:
  // Throws TlsError naming the file and what is wrong (never the key's content).
  static std::shared_ptr<const ServingCertificate> Load(const std::string& cert_file,
                                                        const std::string& key_file);
  ~ServingCertificate();
  ServingCertificate(const ServingCertificate&) = delete;
  ServingCertificate& operator=(const ServingCertificate&) = delete;

  std::int64_t NotAfterUnix() const { return not_after_; }
  std::string Subject() const;

  // Installs the chain and key and the protocol settings on a fresh server context.
  void Configure(SSL_CTX* context, TlsVersion min_version) const;

 private:
  ServingCertificate() = default;
  struct Handles;
  std::unique_ptr<Handles> handles_;
  std::int64_t not_after_ = 0;
};

}  // namespace ncclguard::webhook
