// Generating and inspecting the webhook's certificates with OpenSSL 3 (declared in
// manager/webhook_certs.h).
#include "manager/webhook_certs.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <ctime>
#include <memory>

#include "crypto/openssl_error.h"

namespace ncclguard::manager {
namespace {

using crypto::OpenSslError;

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* pointer) const { Free(pointer); }
};
using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using StorePtr = std::unique_ptr<X509_STORE, Deleter<X509_STORE, X509_STORE_free>>;
using StoreContextPtr =
    std::unique_ptr<X509_STORE_CTX, Deleter<X509_STORE_CTX, X509_STORE_CTX_free>>;
using ExtensionPtr = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION, X509_EXTENSION_free>>;
using BignumPtr = std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>>;

BioPtr ReadBio(const std::string& text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long length = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(length));
}

std::vector<X509Ptr> ReadCertificates(const std::string& pem, const std::string& what) {
  BioPtr bio = ReadBio(pem);
  std::vector<X509Ptr> certs;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert);
  }
  // The loop ends on "no start line"; anything else means a torn certificate.
  const unsigned long last = ERR_peek_last_error();
  ERR_clear_error();
  if (certs.empty()) throw CertError(what + ": no PEM certificate");
  if (last != 0 && ERR_GET_REASON(last) != PEM_R_NO_START_LINE) {
    throw CertError(what + ": a certificate after the first " + std::to_string(certs.size()) +
                    " is not valid PEM");
  }
  return certs;
}

KeyPtr ReadKey(const std::string& pem, const std::string& what) {
  BioPtr bio = ReadBio(pem);
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (!key) throw CertError(what + ": no PEM private key");
  return key;
}

std::string CertificatePem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509(bio.get(), cert) != 1) {
    throw CertError("encoding a certificate: " + OpenSslError());
  }
  return BioText(bio.get());
}

std::int64_t UnixTime(const ASN1_TIME* time) {
  struct tm parts {};
  if (time == nullptr || ASN1_TIME_to_tm(time, &parts) != 1) return 0;
  return static_cast<std::int64_t>(timegm(&parts));
}

// DNS names and IP addresses only: a comma or colon-less oddity would change the meaning of
// OpenSSL's SAN configuration string.
void CheckHost(const std::string& host) {
  if (host.empty() || host.size() > 253) throw CertError("host '" + host + "': not a DNS name");
  if (IsIpAddress(host)) return;
  for (char c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '*';
    if (!ok) throw CertError("host '" + host + "': not a DNS name or IP address");
  }
}

void AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, issuer, cert, nullptr, nullptr, 0);
  ExtensionPtr extension(X509V3_EXT_conf_nid(nullptr, &context, nid, value.c_str()));
  if (!extension || X509_add_ext(cert, extension.get(), -1) != 1) {
    throw CertError("certificate extension " + std::string(OBJ_nid2sn(nid)) + ": " +
                    OpenSslError());
  }
}

// A certificate for `key` with the common fields set; extensions and signature are the caller's.
X509Ptr NewCertificate(EVP_PKEY* key, const std::string& common_name, std::int64_t not_before,
                       std::int64_t not_after) {
  X509Ptr cert(X509_new());
  BignumPtr serial(BN_new());
  if (!cert || !serial || X509_set_version(cert.get(), 2) != 1 ||
      BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr ||
      ASN1_TIME_set(X509_getm_notBefore(cert.get()), static_cast<time_t>(not_before)) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(cert.get()), static_cast<time_t>(not_after)) == nullptr ||
      X509_set_pubkey(cert.get(), key) != 1) {
    throw CertError("building a certificate: " + OpenSslError());
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  const std::string cn = common_name.substr(0, 64);  // the X.509 upper bound
  if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>("ncclguard"), -1, -1,
                                 0) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1) {
    throw CertError("certificate subject: " + OpenSslError());
  }
  return cert;
}

void Sign(X509* cert, EVP_PKEY* key) {
  if (X509_sign(cert, key, EVP_sha256()) <= 0) {
    throw CertError("signing a certificate: " + OpenSslError());
  }
}

std::string Hex(const unsigned char* data, unsigned int length) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(kDigits[data[i] >> 4]);
    out.push_back(kDigits[data[i] & 0xF]);
  }
  return out;
}

CertFacts Facts(X509* cert) {
  CertFacts facts;
  facts.not_before = UnixTime(X509_get0_notBefore(cert));
  facts.not_after = UnixTime(X509_get0_notAfter(cert));
  facts.is_ca = X509_check_ca(cert) > 0;
  if (auto* names = static_cast<GENERAL_NAMES*>(
          X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr))) {
    for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
      const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
      if (name->type == GEN_DNS) {
        const ASN1_STRING* text = name->d.dNSName;
        facts.dns_names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(text)),
                                     static_cast<std::size_t>(ASN1_STRING_length(text)));
      } else if (name->type == GEN_IPADD) {
        const ASN1_OCTET_STRING* octets = name->d.iPAddress;
        const int length = ASN1_STRING_length(octets);
        char text[INET6_ADDRSTRLEN] = {};
        if ((length == 4 || length == 16) &&
            inet_ntop(length == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(octets), text,
                      sizeof text) != nullptr) {
          facts.ip_addresses.emplace_back(text);
        }
      }
    }
    GENERAL_NAMES_free(names);
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (X509_digest(cert, EVP_sha256(), digest, &length) == 1)
    facts.fingerprint = Hex(digest, length);
  return facts;
}

}  // namespace

bool IsIpAddress(const std::string& host) {
  unsigned char buffer[16];
  return inet_pton(AF_INET, host.c_str(), buffer) == 1 ||
         inet_pton(AF_INET6, host.c_str(), buffer) == 1;
}

void CheckPrivateKey(const std::string& pem, const std::string& what) { ReadKey(pem, what); }

std::string GeneratePrivateKeyPem() {
  KeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!key || !bio ||
      PEM_write_bio_PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    throw CertError("generating an ECDSA P-256 key: " + OpenSslError());
  }
  return BioText(bio.get());
}

std::string IssueCaCertificate(const std::string& key_pem, const std::string& common_name,
                               std::int64_t not_before, std::int64_t not_after) {
  KeyPtr key = ReadKey(key_pem, "CA key");
  X509Ptr cert = NewCertificate(key.get(), common_name, not_before, not_after);
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) != 1) {
    throw CertError("CA issuer: " + OpenSslError());
  }
  AddExtension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
  AddExtension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign");
  AddExtension(cert.get(), cert.get(), NID_subject_key_identifier, "hash");
  Sign(cert.get(), key.get());
  return CertificatePem(cert.get());
}

std::string IssueServingCertificate(const std::string& ca_cert_pem, const std::string& ca_key_pem,
                                    const std::string& key_pem,
                                    const std::vector<std::string>& hosts, std::int64_t not_before,
                                    std::int64_t not_after) {
  if (hosts.empty()) throw CertError("a serving certificate needs at least one host");
  std::string sans;
  for (const std::string& host : hosts) {
    CheckHost(host);
    sans += (sans.empty() ? "" : ",") + std::string(IsIpAddress(host) ? "IP:" : "DNS:") + host;
  }
  std::vector<X509Ptr> cas = ReadCertificates(ca_cert_pem, "CA certificate");
  X509* ca = cas.back().get();
  KeyPtr ca_key = ReadKey(ca_key_pem, "CA key");
  if (X509_check_private_key(ca, ca_key.get()) != 1) {
    ERR_clear_error();
    throw CertError("the CA key does not match the CA certificate");
  }
  KeyPtr key = ReadKey(key_pem, "serving key");
  X509Ptr cert = NewCertificate(key.get(), hosts.front(), not_before, not_after);
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(ca)) != 1) {
    throw CertError("serving certificate issuer: " + OpenSslError());
  }
  AddExtension(cert.get(), ca, NID_basic_constraints, "critical,CA:FALSE");
  AddExtension(cert.get(), ca, NID_key_usage, "critical,digitalSignature");
  AddExtension(cert.get(), ca, NID_ext_key_usage, "serverAuth");
  AddExtension(cert.get(), ca, NID_subject_key_identifier, "hash");
  AddExtension(cert.get(), ca, NID_authority_key_identifier, "keyid:always");
  AddExtension(cert.get(), ca, NID_subject_alt_name, sans);
  Sign(cert.get(), ca_key.get());
  return CertificatePem(cert.get());
}

std::vector<CertFacts> InspectCertificates(const std::string& pem, const std::string& what) {
  std::vector<CertFacts> facts;
  for (const X509Ptr& cert : ReadCertificates(pem, what)) facts.push_back(Facts(cert.get()));
  return facts;
}

bool KeyMatchesCertificate(const std::string& cert_pem, const std::string& key_pem) {
  try {
    std::vector<X509Ptr> certs = ReadCertificates(cert_pem, "certificate");
    KeyPtr key = ReadKey(key_pem, "key");
    const bool match = X509_check_private_key(certs.front().get(), key.get()) == 1;
    ERR_clear_error();
    return match;
  } catch (const CertError&) {
    return false;
  }
}

bool VerifyAgainstBundle(const std::string& cert_pem, const std::string& bundle_pem,
                         std::int64_t now, std::string* error) {
  auto fail = [error](const std::string& why) {
    if (error != nullptr) *error = why;
    return false;
  };
  std::vector<X509Ptr> leaf;
  std::vector<X509Ptr> cas;
  try {
    leaf = ReadCertificates(cert_pem, "certificate");
    cas = ReadCertificates(bundle_pem, "CA bundle");
  } catch (const CertError& e) {
    return fail(e.what());
  }
  StorePtr store(X509_STORE_new());
  StoreContextPtr context(X509_STORE_CTX_new());
  if (!store || !context) return fail("out of memory");
  for (const X509Ptr& ca : cas) X509_STORE_add_cert(store.get(), ca.get());
  if (X509_STORE_CTX_init(context.get(), store.get(), leaf.front().get(), nullptr) != 1) {
    return fail(OpenSslError());
  }
  X509_STORE_CTX_set_purpose(context.get(), X509_PURPOSE_SSL_SERVER);
  X509_VERIFY_PARAM_set_time(X509_STORE_CTX_get0_param(context.get()), static_cast<time_t>(now));
  if (X509_verify_cert(context.get()) != 1) {
    const int code = X509_STORE_CTX_get_error(context.get());
    ERR_clear_error();
    return fail(X509_verify_cert_error_string(code));
  }
  return true;
}

bool SignedBy(const std::string& cert_pem, const std::string& ca_cert_pem) {
  try {
    std::vector<X509Ptr> cert = ReadCertificates(cert_pem, "certificate");
    std::vector<X509Ptr> ca = ReadCertificates(ca_cert_pem, "CA certificate");
    const bool signed_by = X509_verify(cert.front().get(), X509_get0_pubkey(ca.front().get())) == 1;
    ERR_clear_error();
    return signed_by;
  } catch (const CertError&) {
    return false;
  }
}

std::string SelectCertificates(const std::string& bundle_pem,
                               const std::vector<std::size_t>& keep) {
  std::vector<X509Ptr> certs = ReadCertificates(bundle_pem, "CA bundle");
  std::string out;
  for (std::size_t index : keep) {
    if (index < certs.size()) out += CertificatePem(certs[index].get());
  }
  return out;
}

std::string LastCertificate(const std::string& bundle_pem) {
  std::vector<X509Ptr> certs = ReadCertificates(bundle_pem, "CA bundle");
  return CertificatePem(certs.back().get());
}

void CheckHosts(const std::vector<std::string>& hosts) {
  for (const std::string& host : hosts) CheckHost(host);
}

std::vector<std::string> ServiceHosts(const std::string& service, const std::string& ns,
                                      const std::vector<std::string>& extra_hosts) {
  std::vector<std::string> hosts = {service + "." + ns + ".svc", service, service + "." + ns,
                                    service + "." + ns + ".svc.cluster.local"};
  for (const std::string& host : extra_hosts) {
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
  }
  return hosts;
}
}  // namespace ncclguard::manager
