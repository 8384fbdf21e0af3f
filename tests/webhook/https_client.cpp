#include "https_client.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>

namespace ncclguard::webhook::testing {
namespace {

size_t Append(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

}  // namespace

HttpResult Fetch(const std::string& url, const std::string& ca_file, const std::string& body,
                 const CurlOptions& options) {
  HttpResult result;
  CURL* curl = curl_easy_init();
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CAINFO, ca_file.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &result.body);
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, options.method.c_str());
  curl_slist* headers = nullptr;
  if (options.method == "POST" || !body.empty()) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    headers = curl_slist_append(headers, ("Content-Type: " + options.content_type).c_str());
    headers = curl_slist_append(headers, "Expect:");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  }
  if (options.ssl_version != 0) curl_easy_setopt(curl, CURLOPT_SSLVERSION, options.ssl_version);
  if (options.ask_http2) {
    curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
  }
  const CURLcode code = curl_easy_perform(curl);
  if (code == CURLE_OK) {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &result.status);
    curl_easy_getinfo(curl, CURLINFO_HTTP_VERSION, &result.http_version);
  } else {
    result.error = curl_easy_strerror(code);
  }
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return result;
}

RawTlsClient::RawTlsClient(int port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    throw std::runtime_error("connect failed");
  }
  // Reads give up after a while: a test must fail, not hang, when the server stays silent.
  timeval timeout{.tv_sec = 5, .tv_usec = 0};
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  context_ = SSL_CTX_new(TLS_client_method());
  ssl_ = SSL_new(context_);
  SSL_set_fd(ssl_, fd_);
  if (SSL_connect(ssl_) != 1) throw std::runtime_error("TLS handshake failed");
}

RawTlsClient::~RawTlsClient() {
  SSL_free(ssl_);
  SSL_CTX_free(context_);
  ::close(fd_);
}

std::string RawTlsClient::PeerSubject() const {
  X509* peer = SSL_get1_peer_certificate(ssl_);
  if (peer == nullptr) return "";
  char buffer[256];
  X509_NAME_oneline(X509_get_subject_name(peer), buffer, sizeof buffer);
  X509_free(peer);
  return buffer;
}

void RawTlsClient::Send(const std::string& bytes) {
  if (SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size())) <= 0) {
    throw std::runtime_error("TLS write failed");
  }
}

void RawTlsClient::ShutdownWrite() {
  SSL_shutdown(ssl_);  // close_notify: the TLS way of half-closing
  ::shutdown(fd_, SHUT_WR);
}

std::string RawTlsClient::ReadAll(int timeout_ms) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (SSL_pending(ssl_) == 0) {
      pollfd poll_fd{fd_, POLLIN, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (::poll(&poll_fd, 1, static_cast<int>(std::max<long long>(left, 0))) <= 0) break;
    }
    char chunk[4096];
    const int n = SSL_read(ssl_, chunk, sizeof chunk);
    if (n <= 0) break;
    out.append(chunk, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace ncclguard::webhook::testing
