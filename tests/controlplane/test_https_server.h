// A small HTTPS/1.1 server on 127.0.0.1 for tests that need the API server
// to call back into the test (admission webhooks). Not for production use.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace ncclguard::testenv {

// A CA and a serving certificate it signed, PEM encoded.
struct TlsMaterial {
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
};

// Generated with the OpenSSL API (EC P-256); SANs: IP 127.0.0.1, DNS localhost.
TlsMaterial MakeServingCertificate(const std::string& common_name);

struct HttpRequest {
  std::string method;
  std::string target;  // path and query, as sent
  std::string path;    // target without the query (kube-apiserver appends ?timeout=)
  std::map<std::string, std::string> headers;  // names lowercased
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

class TestHttpsServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  // Listens on a free port right away; `handler` may run on several threads.
  explicit TestHttpsServer(Handler handler);
  ~TestHttpsServer();
  TestHttpsServer(const TestHttpsServer&) = delete;
  TestHttpsServer& operator=(const TestHttpsServer&) = delete;

  int port() const { return port_; }
  std::string Url(const std::string& path) const;
  const std::string& ca_pem() const { return tls_.ca_pem; }
  int requests_served() const { return requests_served_.load(); }

 private:
  void AcceptLoop();
  void Serve(int fd);

  Handler handler_;
  TlsMaterial tls_;
  void* ssl_ctx_ = nullptr;  // SSL_CTX*, kept out of the header
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> requests_served_{0};
  std::thread acceptor_;
  std::mutex mutex_;
  std::vector<std::thread> workers_;
  std::set<int> open_fds_;
};

}  // namespace ncclguard::testenv
