#include "test_https_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace ncclguard::testenv {
namespace {

using PkeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;

std::string OpenSslError(const std::string& what) {
  std::array<char, 256> text{};
  ERR_error_string_n(ERR_get_error(), text.data(), text.size());
  return what + ": " + text.data();
}

void Check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(OpenSslError(what));
}

void AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  Check(ext != nullptr, std::string("building extension ") + value);
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// issuer == nullptr makes a self-signed certificate.
X509Ptr MakeCertificate(EVP_PKEY* key, const std::string& common_name, X509* issuer,
                        EVP_PKEY* issuer_key, long serial) {
  X509Ptr cert(X509_new(), X509_free);
  Check(cert != nullptr, "X509_new");
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  // Backdated an hour so a clock skew between test and server cannot matter.
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 7L * 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  AddExtension(cert.get(), signer, NID_subject_key_identifier, "hash");
  if (issuer == nullptr) {
    AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE");
    AddExtension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    AddExtension(cert.get(), signer, NID_authority_key_identifier, "keyid");
    AddExtension(cert.get(), signer, NID_basic_constraints, "CA:FALSE");
    AddExtension(cert.get(), signer, NID_key_usage, "critical,digitalSignature");
    AddExtension(cert.get(), signer, NID_ext_key_usage, "serverAuth");
    AddExtension(cert.get(), signer, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
  }
  Check(X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) > 0,
        "X509_sign");
  return cert;
}

std::string Pem(const std::function<int(BIO*)>& write) {
  BioPtr bio(BIO_new(BIO_s_mem()), BIO_free);
  Check(bio != nullptr && write(bio.get()) == 1, "writing PEM");
  char* data = nullptr;
  long size = BIO_get_mem_data(bio.get(), &data);
  return {data, static_cast<std::size_t>(size)};
}

std::string Lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    default:
      return "Status";
  }
}

// Reads one request from a keep-alive connection; false on EOF or error.
bool ReadRequest(SSL* ssl, std::string& buffer, HttpRequest& request) {
  std::array<char, 16384> chunk{};
  auto read_more = [&] {
    int n = SSL_read(ssl, chunk.data(), static_cast<int>(chunk.size()));
    if (n <= 0) return false;
    buffer.append(chunk.data(), static_cast<std::size_t>(n));
    return true;
  };
  std::size_t header_end;
  while ((header_end = buffer.find("\r\n\r\n")) == std::string::npos) {
    if (!read_more()) return false;
  }
  std::string head = buffer.substr(0, header_end);
  std::size_t line_end = head.find("\r\n");
  std::string request_line = head.substr(0, line_end);
  std::size_t first_space = request_line.find(' ');
  std::size_t second_space = request_line.find(' ', first_space + 1);
  if (first_space == std::string::npos || second_space == std::string::npos) return false;
  request = {};
  request.method = request_line.substr(0, first_space);
  request.target = request_line.substr(first_space + 1, second_space - first_space - 1);
  request.path = request.target.substr(0, request.target.find('?'));
  std::size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
  while (pos < head.size()) {
    std::size_t next = head.find("\r\n", pos);
    if (next == std::string::npos) next = head.size();
    std::string line = head.substr(pos, next - pos);
    if (auto colon = line.find(':'); colon != std::string::npos) {
      std::size_t value_start = line.find_first_not_of(' ', colon + 1);
      request.headers[Lowercase(line.substr(0, colon))] =
          value_start == std::string::npos ? "" : line.substr(value_start);
    }
    pos = next + 2;
  }
  // Webhook callers send a Content-Length body; chunked requests are not needed.
  std::size_t length = 0;
  if (auto it = request.headers.find("content-length"); it != request.headers.end()) {
    length = std::stoul(it->second);
  }
  std::size_t body_start = header_end + 4;
  while (buffer.size() < body_start + length) {
    if (!read_more()) return false;
  }
  request.body = buffer.substr(body_start, length);
  buffer.erase(0, body_start + length);
  return true;
}

bool WriteAll(SSL* ssl, const std::string& data) {
  std::size_t written = 0;
  while (written < data.size()) {
    int n = SSL_write(ssl, data.data() + written, static_cast<int>(data.size() - written));
    if (n <= 0) return false;
    written += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

TlsMaterial MakeServingCertificate(const std::string& common_name) {
  PkeyPtr ca_key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  PkeyPtr key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  Check(ca_key != nullptr && key != nullptr, "generating EC keys");
  X509Ptr ca = MakeCertificate(ca_key.get(), common_name + "-ca", nullptr, nullptr, 1);
  X509Ptr cert = MakeCertificate(key.get(), common_name, ca.get(), ca_key.get(), 2);
  TlsMaterial tls;
  tls.ca_pem = Pem([&](BIO* bio) { return PEM_write_bio_X509(bio, ca.get()); });
  tls.cert_pem = Pem([&](BIO* bio) { return PEM_write_bio_X509(bio, cert.get()); });
  tls.key_pem = Pem([&](BIO* bio) {
    return PEM_write_bio_PrivateKey(bio, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  });
  return tls;
}

TestHttpsServer::TestHttpsServer(Handler handler)
    : handler_(std::move(handler)), tls_(MakeServingCertificate("ncclguard-test-webhook")) {
  // A peer that hangs up before our answer would otherwise kill the test
  // process with SIGPIPE from inside SSL_write.
  signal(SIGPIPE, SIG_IGN);
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  Check(ctx != nullptr, "SSL_CTX_new");
  ssl_ctx_ = ctx;
  BioPtr cert_bio(BIO_new_mem_buf(tls_.cert_pem.data(), static_cast<int>(tls_.cert_pem.size())),
                  BIO_free);
  BioPtr key_bio(BIO_new_mem_buf(tls_.key_pem.data(), static_cast<int>(tls_.key_pem.size())),
                 BIO_free);
  X509Ptr cert(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr), X509_free);
  PkeyPtr key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
  Check(cert != nullptr && key != nullptr, "loading the generated certificate");
  Check(
      SSL_CTX_use_certificate(ctx, cert.get()) == 1 && SSL_CTX_use_PrivateKey(ctx, key.get()) == 1,
      "configuring the TLS context");

  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(listen_fd_, 64) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    int error = errno;
    close(listen_fd_);
    SSL_CTX_free(ctx);
    throw std::system_error(error, std::generic_category(), "listening on 127.0.0.1");
  }
  port_ = ntohs(address.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

TestHttpsServer::~TestHttpsServer() {
  stopping_ = true;
  acceptor_.join();
  {
    // Wake workers blocked in SSL_read on idle keep-alive connections.
    std::lock_guard lock(mutex_);
    for (int fd : open_fds_) shutdown(fd, SHUT_RDWR);
  }
  for (auto& worker : workers_) worker.join();
  close(listen_fd_);
  SSL_CTX_free(static_cast<SSL_CTX*>(ssl_ctx_));
}

std::string TestHttpsServer::Url(const std::string& path) const {
  return "https://127.0.0.1:" + std::to_string(port_) + path;
}

void TestHttpsServer::AcceptLoop() {
  while (!stopping_) {
    pollfd pfd{listen_fd_, POLLIN, 0};
    if (poll(&pfd, 1, 100) <= 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard lock(mutex_);
    open_fds_.insert(fd);
    workers_.emplace_back([this, fd] { Serve(fd); });
  }
}

void TestHttpsServer::Serve(int fd) {
  SSL* ssl = SSL_new(static_cast<SSL_CTX*>(ssl_ctx_));
  SSL_set_fd(ssl, fd);
  if (SSL_accept(ssl) == 1) {
    std::string buffer;
    HttpRequest request;
    while (!stopping_ && ReadRequest(ssl, buffer, request)) {
      HttpResponse response;
      try {
        response = handler_(request);
      } catch (const std::exception& e) {
        response = {500, "text/plain", std::string("handler failed: ") + e.what()};
      }
      ++requests_served_;
      std::string wire = "HTTP/1.1 " + std::to_string(response.status) + " " +
                         ReasonPhrase(response.status) +
                         "\r\nContent-Type: " + response.content_type +
                         "\r\nContent-Length: " + std::to_string(response.body.size()) +
                         "\r\n\r\n" + response.body;
      if (!WriteAll(ssl, wire)) break;
    }
    SSL_shutdown(ssl);
  }
  SSL_free(ssl);
  std::lock_guard lock(mutex_);
  open_fds_.erase(fd);
  close(fd);
}

}  // namespace ncclguard::testenv
