// Plain-HTTP /healthz and /readyz for `ncclguard controller` when it serves no webhook (with
// the webhook, the webhook server's own endpoints are the probes).
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace ncclguard::cli {

class HealthServer {
 public:
  // `listen`: host:port or :port (all interfaces). `ready` answers /readyz.
  HealthServer(std::string listen, std::function<bool()> ready);
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  // Throws std::runtime_error when the address is malformed or cannot be bound.
  void Start();
  void Shutdown();

 private:
  struct Listener;
  std::string listen_;
  std::function<bool()> ready_;
  std::unique_ptr<Listener> listener_;
};

// Whether --health-listen asks for no health server ("" or "0").
bool HealthListenDisabled(const std::string& listen);

}  // namespace ncclguard::cli
