// Runs the real WebhookServer in the test process on a free loopback port, with a serving
// certificate generated for the test (testenv::MakeServingCertificate).
#pragma once

#include <memory>
#include <string>

#include "test_https_server.h"
#include "webhook/server.h"

namespace ncclguard::webhook::testing {

// A loopback port nothing listens on right now.
int FreePort();

void WriteFile(const std::string& path, const std::string& text);

class ServedWebhook {
 public:
  // `adjust` may change the config (policy, TLS version, limits) before the server starts.
  explicit ServedWebhook(const std::function<void(ServerConfig&)>& adjust = {});
  ~ServedWebhook();

  WebhookServer& server() { return *server_; }
  int port() const { return port_; }
  std::string Url(const std::string& path) const;
  const std::string& ca_file() const { return ca_file_; }
  const std::string& ca_pem() const { return tls_.ca_pem; }
  const std::string& cert_file() const { return cert_file_; }
  const std::string& key_file() const { return key_file_; }
  const std::string& dir() const { return dir_; }

 private:
  prometheus::Registry metrics_registry_;  // this server's metrics alone
  std::string dir_;
  testenv::TlsMaterial tls_;
  std::string cert_file_, key_file_, ca_file_;
  int port_ = 0;
  std::unique_ptr<WebhookServer> server_;
};

}  // namespace ncclguard::webhook::testing
