// A minimal REST client for tests, on libcurl, authenticating with the
// control plane's admin client certificate. The product client lives in kube/.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "controlplane_env.h"

namespace ncclguard::testenv {

struct KubeResponse {
  long status = 0;  // HTTP status; 0 when the request did not complete
  std::string body;
  std::string error;  // transport error, empty on success

  nlohmann::json Json() const;  // the body parsed; throws with the body on bad JSON
};

struct WatchResult {
  bool matched = false;                // the predicate accepted an event before the timeout
  std::vector<nlohmann::json> events;  // every event received, in order
  std::string error;
};

class TestKubeClient {
 public:
  explicit TestKubeClient(const ControlPlaneInfo& info);
  ~TestKubeClient();
  TestKubeClient(const TestKubeClient&) = delete;
  TestKubeClient& operator=(const TestKubeClient&) = delete;

  // `path` starts with /api or /apis and may carry a query string.
  KubeResponse Request(const std::string& method, const std::string& path,
                       const std::string& body = "",
                       const std::string& content_type = "application/json");

  KubeResponse Get(const std::string& path) { return Request("GET", path); }
  KubeResponse Post(const std::string& path, const nlohmann::json& body) {
    return Request("POST", path, body.dump());
  }
  KubeResponse Delete(const std::string& path) { return Request("DELETE", path); }

  // Streams `path` with ?watch=1 (appended) and hands each event to `until`
  // until it returns true or `timeout` passes. Start from a list's
  // resourceVersion to see events that happened before the call.
  WatchResult Watch(const std::string& path,
                    const std::function<bool(const nlohmann::json& event)>& until,
                    std::chrono::milliseconds timeout);

 private:
  ControlPlaneInfo info_;
  std::shared_ptr<void> curl_;  // a CURL* reused across requests (keep-alive)
};

// Polls `condition` every `interval` until it holds or `timeout` passes.
bool Eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
                std::chrono::milliseconds interval = std::chrono::milliseconds(100));

// Creates a namespace named <prefix>-<random suffix> with `labels`; returns its name.
std::string CreateTestNamespace(TestKubeClient& client, const std::string& prefix,
                                const nlohmann::json& labels = nlohmann::json::object());

}  // namespace ncclguard::testenv
