#include "webhook_registration.h"

#include <openssl/evp.h>

#include <iostream>
#include <stdexcept>
#include <utility>
#include <vector>

namespace ncclguard::testenv {
namespace {

constexpr const char* kApiPrefix = "/apis/admissionregistration.k8s.io/v1/";

std::string Resource(WebhookKind kind) {
  return kind == WebhookKind::Mutating ? "mutatingwebhookconfigurations"
                                       : "validatingwebhookconfigurations";
}

}  // namespace

std::string Base64(const std::string& bytes) {
  std::vector<unsigned char> out(4 * ((bytes.size() + 2) / 3) + 1);
  int written = EVP_EncodeBlock(out.data(), reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  return {reinterpret_cast<const char*>(out.data()), static_cast<std::size_t>(written)};
}

std::vector<ChartWebhookEntry> ChartWebhookEntries() {
  const auto mode = [](const char* op, nlohmann::json values) {
    return nlohmann::json{{"key", "ncclguard.io/mode"}, {"operator", op}, {"values", values}};
  };
  const nlohmann::json policy = mode("NotIn", {"audit", "enforce"});
  const nlohmann::json enforce = mode("In", {"enforce"});
  return {{WebhookKind::Mutating, "mutate", "/mutate", policy, "Fail"},
          {WebhookKind::Mutating, "mutate-enforce", "/mutate/enforce", enforce, "Fail"},
          {WebhookKind::Validating, "validate", "/validate", policy, "Fail"},
          {WebhookKind::Validating, "validate-enforce", "/validate/enforce", enforce, "Fail"},
          {WebhookKind::Validating, "validate-audit", "/validate/audit", mode("In", {"audit"}),
           "Ignore"}};
}

nlohmann::json WebhookConfiguration(const WebhookSpec& spec) {
  nlohmann::json webhook = {
      {"name", spec.name + ".ncclguard.test"},
      {"clientConfig", {{"url", spec.url}, {"caBundle", Base64(spec.ca_bundle_pem)}}},
      {"rules", spec.rules},
      {"namespaceSelector", spec.namespace_selector},
      {"sideEffects", spec.side_effects},
      {"timeoutSeconds", spec.timeout_seconds},
      {"failurePolicy", spec.failure_policy},
      {"admissionReviewVersions", {"v1"}},
  };
  bool mutating = spec.kind == WebhookKind::Mutating;
  return {{"apiVersion", "admissionregistration.k8s.io/v1"},
          {"kind", mutating ? "MutatingWebhookConfiguration" : "ValidatingWebhookConfiguration"},
          {"metadata", {{"name", spec.name}}},
          {"webhooks", {webhook}}};
}

WebhookRegistration::WebhookRegistration(TestKubeClient& client, WebhookSpec spec)
    : client_(client), spec_(std::move(spec)) {
  KubeResponse created =
      client_.Post(kApiPrefix + Resource(spec_.kind), WebhookConfiguration(spec_));
  if (created.status != 201) {
    throw std::runtime_error("registering " + Resource(spec_.kind) + "/" + spec_.name + ": HTTP " +
                             std::to_string(created.status) + " " + created.error + created.body);
  }
  registered_ = true;
}

WebhookRegistration::~WebhookRegistration() {
  try {
    Delete();
  } catch (const std::exception& e) {
    std::cerr << "WebhookRegistration: " << e.what() << "\n";
  }
}

std::string WebhookRegistration::Path() const {
  return kApiPrefix + Resource(spec_.kind) + "/" + spec_.name;
}

void WebhookRegistration::Delete() {
  if (!registered_) return;
  KubeResponse deleted = client_.Delete(Path());
  if (deleted.status != 200 && deleted.status != 404) {
    throw std::runtime_error("deleting " + Path() + ": HTTP " + std::to_string(deleted.status) +
                             " " + deleted.error + deleted.body);
  }
  registered_ = false;
}

}  // namespace ncclguard::testenv
