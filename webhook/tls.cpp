#include "webhook/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "crypto/openssl_error.h"

namespace ncclguard::webhook {
namespace {

using crypto::OpenSslError;

// TLS 1.2 suites with forward secrecy and AEAD only; TLS 1.3 suites are all acceptable.
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// Certificates and keys are small; anything larger is not one.
constexpr std::streamoff kMaxPemBytes = 1 << 20;

std::string ReadPem(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw TlsError(std::string(what) + " " + path + ": cannot open: " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0 || size > kMaxPemBytes) {
    throw TlsError(std::string(what) + " " + path + ": not a PEM file of a sane size");
  }
  in.seekg(0);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;

BioPtr MemoryBio(const std::string& text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())), &BIO_free);
}

// Picks http/1.1 when the client offers it; otherwise no ALPN (never h2).
int SelectHttp11(SSL*, const unsigned char** out, unsigned char* out_length,
                 const unsigned char* in, unsigned int in_length, void*) {
  static constexpr unsigned char kHttp11[] = {'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned int i = 0;
  while (i < in_length) {
    const unsigned int length = in[i];
    if (i + 1 + length > in_length) break;
    if (length == sizeof kHttp11 && std::memcmp(in + i + 1, kHttp11, sizeof kHttp11) == 0) {
      *out = in + i + 1;
      *out_length = static_cast<unsigned char>(length);
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + length;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

}  // namespace

struct ServingCertificate::Handles {
  X509* leaf = nullptr;
  std::vector<X509*> chain;
  EVP_PKEY* key = nullptr;
  ~Handles() {
    X509_free(leaf);
    for (X509* cert : chain) X509_free(cert);
    EVP_PKEY_free(key);
  }
};

ServingCertificate::~ServingCertificate() = default;

std::optional<TlsVersion> ParseTlsVersion(std::string_view text) {
  if (text == "VersionTLS12" || text == "1.2") return TlsVersion::V1_2;
  if (text == "VersionTLS13" || text == "1.3") return TlsVersion::V1_3;
  return std::nullopt;
}

std::shared_ptr<const ServingCertificate> ServingCertificate::Load(const std::string& cert_file,
                                                                   const std::string& key_file) {
  std::shared_ptr<ServingCertificate> loaded(new ServingCertificate());
  loaded->handles_ = std::make_unique<Handles>();
  Handles& handles = *loaded->handles_;

  const std::string cert_pem = ReadPem(cert_file, "certificate");
  BioPtr cert_bio = MemoryBio(cert_pem);
  handles.leaf = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr);
  if (handles.leaf == nullptr) {
    throw TlsError("certificate " + cert_file + ": no PEM certificate: " + OpenSslError());
  }
  while (X509* intermediate = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr)) {
    handles.chain.push_back(intermediate);
  }
  ERR_clear_error();  // the loop ends on "no start line"

  std::string key_pem = ReadPem(key_file, "private key");
  BioPtr key_bio = MemoryBio(key_pem);
  handles.key = PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr);
  OPENSSL_cleanse(key_pem.data(), key_pem.size());
  if (handles.key == nullptr) {
    throw TlsError("private key " + key_file + ": no PEM private key: " + OpenSslError());
  }
  if (X509_check_private_key(handles.leaf, handles.key) != 1) {
    ERR_clear_error();
    throw TlsError("private key " + key_file + " does not match certificate " + cert_file);
  }

  const ASN1_TIME* not_after = X509_get0_notAfter(handles.leaf);
  struct tm expiry {};
  if (not_after != nullptr && ASN1_TIME_to_tm(not_after, &expiry) == 1) {
    loaded->not_after_ = static_cast<std::int64_t>(timegm(&expiry));
  }
  return loaded;
}

std::string ServingCertificate::Subject() const {
  char buffer[256];
  X509_NAME_oneline(X509_get_subject_name(handles_->leaf), buffer, sizeof buffer);
  return buffer;
}

void ServingCertificate::Configure(SSL_CTX* context, TlsVersion min_version) const {
  const int min = min_version == TlsVersion::V1_3 ? TLS1_3_VERSION : TLS1_2_VERSION;
  if (SSL_CTX_set_min_proto_version(context, min) != 1 ||
      SSL_CTX_set_cipher_list(context, kTls12Ciphers) != 1) {
    throw TlsError("configuring TLS: " + OpenSslError());
  }
  SSL_CTX_set_options(context, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                   SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_TICKET);
  SSL_CTX_set_alpn_select_cb(context, &SelectHttp11, nullptr);
  if (SSL_CTX_use_certificate(context, handles_->leaf) != 1 ||
      SSL_CTX_use_PrivateKey(context, handles_->key) != 1) {
    throw TlsError("installing the serving certificate: " + OpenSslError());
  }
  for (X509* intermediate : handles_->chain) {
    // add1 takes its own reference: the context may outlive this certificate after a reload.
    if (SSL_CTX_add1_chain_cert(context, intermediate) != 1) {
      throw TlsError("installing the certificate chain: " + OpenSslError());
    }
  }
}

}  // namespace ncclguard::webhook
