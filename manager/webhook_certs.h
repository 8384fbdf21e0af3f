// The webhook's self-managed certificates: a self-signed CA and a serving certificate it
// signed, kept in a Secret. This file is the part without I/O: generating and inspecting the
// material (OpenSSL 3, ECDSA P-256) and deciding, from the Secret's contents and the time,
// what to do next (docs/certificates.md "Rotation"). webhook_certs_x509.cpp holds the OpenSSL
// part, webhook_certs.cpp the decisions.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace ncclguard::manager {

// Material that is missing, unparsable or inconsistent; the message never holds key material.
class CertError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The Secret's data keys (kubernetes.io/tls plus the CA's, so renewals keep the same CA).
inline constexpr const char* kTlsCertKey = "tls.crt";
inline constexpr const char* kTlsKeyKey = "tls.key";
inline constexpr const char* kCaCertKey = "ca.crt";  // the bundle: one or two CAs, oldest first
inline constexpr const char* kCaKeyKey = "ca.key";   // key of the newest CA in ca.crt

struct CertLifetimes {
  std::chrono::seconds ca_validity{5LL * 365 * 24 * 3600};
  // A new CA joins the bundle when the newest has less than this left.
  std::chrono::seconds ca_rollover_before{365LL * 24 * 3600};
  std::chrono::seconds serving_validity{90LL * 24 * 3600};
  // notBefore lies this far in the past, for clocks that lag ours.
  std::chrono::seconds backdate{300};
};

// What a certificate says, as far as rotation cares.
struct CertFacts {
  std::int64_t not_before = 0;  // unix seconds
  std::int64_t not_after = 0;
  bool is_ca = false;
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;
  std::string fingerprint;  // SHA-256 of the DER, hex
};

std::string GeneratePrivateKeyPem();
// A self-signed CA certificate for `key_pem`.
std::string IssueCaCertificate(const std::string& key_pem, const std::string& common_name,
                               std::int64_t not_before, std::int64_t not_after);
// A serving certificate (serverAuth) for `key_pem` with `hosts` as SANs (IP addresses become IP
// SANs), signed by the CA.
std::string IssueServingCertificate(const std::string& ca_cert_pem, const std::string& ca_key_pem,
                                    const std::string& key_pem,
                                    const std::vector<std::string>& hosts, std::int64_t not_before,
                                    std::int64_t not_after);

// Every certificate in `pem`, in order; throws CertError when there is none or one is broken.
std::vector<CertFacts> InspectCertificates(const std::string& pem, const std::string& what);
bool KeyMatchesCertificate(const std::string& cert_pem, const std::string& key_pem);
// Whether `cert_pem` (its first certificate) chains to one of the CAs in `bundle_pem` at `now`
// (OpenSSL's X509_verify_cert); `error` says why not.
bool VerifyAgainstBundle(const std::string& cert_pem, const std::string& bundle_pem,
                         std::int64_t now, std::string* error = nullptr);
// Whether the certificate's signature was made by the CA's key.
bool SignedBy(const std::string& cert_pem, const std::string& ca_cert_pem);
// The certificates of `bundle_pem` at `indexes`, re-encoded as PEM.
std::string SelectCertificates(const std::string& bundle_pem, const std::vector<std::size_t>& keep);
// The last certificate of `bundle_pem`.
std::string LastCertificate(const std::string& bundle_pem);

bool IsIpAddress(const std::string& host);
// Throws CertError (naming `what`) when `pem` holds no private key.
void CheckPrivateKey(const std::string& pem, const std::string& what);

// Throws CertError naming the first host that is neither a DNS name nor an IP address.
void CheckHosts(const std::vector<std::string>& hosts);

// The SANs of the webhook Service as the API server addresses it, plus extra hosts.
std::vector<std::string> ServiceHosts(const std::string& service, const std::string& ns,
                                      const std::vector<std::string>& extra_hosts);

// A Secret's data (decoded) checked for consistency: every key present and parsable, keys
// matching their certificates, the serving certificate chaining to the bundle.
struct CertState {
  std::vector<CertFacts> cas;  // the bundle, oldest first; the last one signs
  CertFacts serving;
  bool serving_under_newest_ca = false;
};
// Throws CertError saying what is wrong (the Secret is then replaced).
CertState ParseCertSecret(const std::map<std::string, std::string>& data);

enum class CertAction {
  kNone,            // nothing to do (reason says why, e.g. waiting for the bundle)
  kCreate,          // no usable material: a new CA and serving certificate
  kAddCa,           // the CA nears expiry: a new CA joins the bundle (serving unchanged)
  kDropExpiredCas,  // expired CAs leave the bundle
  kRenewServing,    // a new serving certificate from the newest CA
};

struct CertDecision {
  CertAction action = CertAction::kNone;
  std::string reason;
};

// What to do at `now`. `bundle_published`: every webhook configuration that exists carries the
// current bundle, so a certificate from any CA in it is trusted by the API server.
CertDecision DecideCertAction(const CertState& state, std::int64_t now, bool bundle_published,
                              const std::vector<std::string>& hosts,
                              const CertLifetimes& lifetimes);

// The Secret's new data for `decision` (given the old data, decoded). kCreate ignores `old`.
std::map<std::string, std::string> ApplyCertAction(const CertDecision& decision,
                                                   const std::map<std::string, std::string>& old,
                                                   std::int64_t now,
                                                   const std::vector<std::string>& hosts,
                                                   const CertLifetimes& lifetimes);

const char* CertActionName(CertAction action);

}  // namespace ncclguard::manager
