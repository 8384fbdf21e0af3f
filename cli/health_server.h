// Plain-HTTP /healthz, /readyz and /metrics (the process's registry, metrics/registry.h): the
// metrics port of `ncclguard controller` and `ncclguard probe --publish`, and the controller's
// health port when it serves no webhook (with the webhook, its own endpoints are the probes).
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace ncclguard::cli {

class HealthServer {
 public:
  // `listen`: host:port or :port (all interfaces). `ready` answers /readyz. `flag` names the
  // address in errors ("--metrics-listen").
  HealthServer(std::string listen, std::function<bool()> ready,
               std::string flag = "--health-listen");
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  // Throws std::runtime_error when the address is malformed or cannot be bound.
  void Start();
  void Shutdown();

 private:
  struct Listener;
  std::string listen_;
  std::string flag_;
  std::function<bool()> ready_;
  std::unique_ptr<Listener> listener_;
};

// Whether a listen flag asks for no server ("" or "0").
bool HealthListenDisabled(const std::string& listen);

}  // namespace ncclguard::cli
