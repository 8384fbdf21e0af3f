// Test clients for the webhook over real TLS: libcurl for well-formed requests, a raw OpenSSL
// connection for clients that misbehave (slow, half-closed) or to inspect the handshake.
#pragma once

#include <string>
#include <vector>

using SSL = struct ssl_st;
using SSL_CTX = struct ssl_ctx_st;

namespace ncclguard::webhook::testing {

struct HttpResult {
  long status = 0;
  std::string body;
  std::string error;      // curl's error; empty when a response arrived
  long http_version = 0;  // CURL_HTTP_VERSION_*
};

struct CurlOptions {
  std::string method = "POST";
  std::string content_type = "application/json";
  long ssl_version = 0;  // CURL_SSLVERSION_* (with a max), 0 = default
  bool ask_http2 = false;
};

HttpResult Fetch(const std::string& url, const std::string& ca_file, const std::string& body = "",
                 const CurlOptions& options = {});

// A TLS connection with no verification (the tests inspect what the server presents).
class RawTlsClient {
 public:
  explicit RawTlsClient(int port);
  ~RawTlsClient();
  RawTlsClient(const RawTlsClient&) = delete;
  RawTlsClient& operator=(const RawTlsClient&) = delete;

  std::string PeerSubject() const;
  void Send(const std::string& bytes);
  void ShutdownWrite();
  // Reads until the peer closes or `timeout_ms` passes.
  std::string ReadAll(int timeout_ms);

 private:
  int fd_ = -1;
  SSL_CTX* context_ = nullptr;
  SSL* ssl_ = nullptr;
};

}  // namespace ncclguard::webhook::testing
