#include "served_webhook.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "controlplane_env.h"
#include "loopback_port.h"

namespace ncclguard::webhook::testing {

int FreePort() { return test::FreeLoopbackPort(); }

void WriteFile(const std::string& path, const std::string& text) {
  // Write then rename, as a Secret volume update is atomic per file.
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + temporary);
  }
  std::filesystem::rename(temporary, path);
}

ServedWebhook::ServedWebhook(const std::function<void(ServerConfig&)>& adjust)
    : dir_(testenv::MakeTempDir("ncclguard-webhook")),
      tls_(testenv::MakeServingCertificate("ncclguard-webhook-test")) {
  cert_file_ = dir_ + "/tls.crt";
  key_file_ = dir_ + "/tls.key";
  ca_file_ = dir_ + "/ca.crt";
  WriteFile(cert_file_, tls_.cert_pem);
  WriteFile(key_file_, tls_.key_pem);
  WriteFile(ca_file_, tls_.ca_pem);

  ServerConfig config;
  config.tls_cert_file = cert_file_;
  config.tls_key_file = key_file_;
  config.reload_interval = std::chrono::milliseconds(20);
  config.drain_timeout = std::chrono::milliseconds(3000);
  config.metrics_registry = &metrics_registry_;
  if (adjust) adjust(config);
  // A port taken between FreePort and the bind is retried.
  for (int attempt = 0;; ++attempt) {
    port_ = FreePort();
    config.listen = "127.0.0.1:" + std::to_string(port_);
    server_ = std::make_unique<WebhookServer>(config);
    try {
      server_->Start();
      return;
    } catch (const std::runtime_error&) {
      if (attempt == 5) throw;
    }
  }
}

ServedWebhook::~ServedWebhook() {
  server_.reset();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string ServedWebhook::Url(const std::string& path) const {
  return "https://127.0.0.1:" + std::to_string(port_) + path;
}

}  // namespace ncclguard::webhook::testing
