// Registers admission webhooks that point kube-apiserver at a local HTTPS
// listener (clientConfig.url + caBundle), the way envtest wires webhooks.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_kube_client.h"

namespace ncclguard::testenv {

enum class WebhookKind { Mutating, Validating };

struct WebhookSpec {
  WebhookKind kind = WebhookKind::Mutating;
  std::string name;           // configuration name; the webhook is named <name>.ncclguard.test
  std::string url;            // https://127.0.0.1:<port>/<path>
  std::string ca_bundle_pem;  // CA that signed the listener's certificate
  // Default: CREATE of core/v1 pods.
  nlohmann::json rules = nlohmann::json::array({{{"apiGroups", {""}},
                                                 {"apiVersions", {"v1"}},
                                                 {"operations", {"CREATE"}},
                                                 {"resources", {"pods"}}}});
  // Default matches every namespace; tests should narrow it to their own.
  nlohmann::json namespace_selector = nlohmann::json::object();
  std::string failure_policy = "Fail";
  std::string side_effects = "None";
  int timeout_seconds = 5;
};

// One entry of the chart's webhook configurations (charts/ncclguard/templates/
// webhook-configurations.yaml): ncclguard's path, and the expression on the namespace's
// ncclguard.io/mode label that sends a namespace to it (audit mode, docs/operator.md).
struct ChartWebhookEntry {
  WebhookKind kind = WebhookKind::Mutating;
  std::string name;  // the chart's name without ".ncclguard.io": "mutate", "validate-audit"...
  std::string path;  // "/mutate", "/validate/audit"...
  nlohmann::json mode_expression;  // a namespaceSelector matchExpressions entry
  std::string failure_policy;      // "Fail", or "Ignore" for the audit entry
};

// The chart's entries with rules for namespaced objects: mutate, mutate-enforce, validate,
// validate-enforce, validate-audit.
std::vector<ChartWebhookEntry> ChartWebhookEntries();

// The configuration object for `spec`, as sent to the API server.
nlohmann::json WebhookConfiguration(const WebhookSpec& spec);

// Owns one registered configuration; deletes it when destroyed.
class WebhookRegistration {
 public:
  // Creates the configuration; throws with the server's answer on failure.
  WebhookRegistration(TestKubeClient& client, WebhookSpec spec);
  ~WebhookRegistration();
  WebhookRegistration(const WebhookRegistration&) = delete;
  WebhookRegistration& operator=(const WebhookRegistration&) = delete;

  // Deletes the configuration (idempotent); throws on an unexpected answer.
  void Delete();
  std::string Path() const;

 private:
  TestKubeClient& client_;
  WebhookSpec spec_;
  bool registered_ = false;
};

std::string Base64(const std::string& bytes);

}  // namespace ncclguard::testenv
