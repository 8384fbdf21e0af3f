// Proves the webhook path end to end: kube-apiserver calls an HTTPS listener
// inside the test through a registered webhook configuration (url + caBundle),
// and its answer (a patch or a denial) decides what gets stored.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>

#include "controlplane_env.h"
#include "test_https_server.h"
#include "test_kube_client.h"
#include "webhook_registration.h"

namespace ncclguard::testenv {
namespace {

using nlohmann::json;
using std::chrono::seconds;

constexpr const char* kDenialMessage = "ncclguard test webhook: pods in this namespace are denied";

// AdmissionReview v1 answer for the request in `review`.
json AdmissionResponse(const json& review, bool allowed, const json& patch = nullptr,
                       const std::string& message = "") {
  json response = {{"uid", review.at("request").at("uid")}, {"allowed", allowed}};
  if (!patch.is_null()) {
    response["patchType"] = "JSONPatch";
    response["patch"] = Base64(patch.dump());
  }
  if (!message.empty()) response["status"] = {{"code", 403}, {"message", message}};
  return {
      {"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"response", response}};
}

json TrainPod(const std::string& name) {
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"labels", {{"app", "train"}}}}},
      {"spec", {{"containers", {{{"name", "main"}, {"image", "registry.invalid/trainer:1"}}}}}}};
}

class WebhookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = std::make_unique<TestKubeClient>(ControlPlaneEnvironment::Info());
    // The selector label keeps each test's webhook to its own namespace.
    namespace_ = CreateTestNamespace(*client_, "webhook", {{"ncclguard-test", "placeholder"}});
    json relabel = {{"metadata", {{"labels", {{"ncclguard-test", namespace_}}}}}};
    ASSERT_EQ(client_
                  ->Request("PATCH", "/api/v1/namespaces/" + namespace_, relabel.dump(),
                            "application/merge-patch+json")
                  .status,
              200);
    server_ = std::make_unique<TestHttpsServer>([this](const HttpRequest& request) {
      json review = json::parse(request.body);
      if (request.path == "/mutate") {
        ++mutate_calls_;
        json patch = json::array(
            {{{"op", "add"}, {"path", "/metadata/labels/ncclguard-patched"}, {"value", "yes"}}});
        return HttpResponse{200, "application/json", AdmissionResponse(review, true, patch).dump()};
      }
      return HttpResponse{200, "application/json",
                          AdmissionResponse(review, false, nullptr, kDenialMessage).dump()};
    });
  }
  void TearDown() override {
    if (client_ && !namespace_.empty()) client_->Delete("/api/v1/namespaces/" + namespace_);
  }

  WebhookSpec Spec(WebhookKind kind, const std::string& path) {
    WebhookSpec spec;
    spec.kind = kind;
    spec.name = namespace_ + (kind == WebhookKind::Mutating ? "-mutate" : "-validate");
    spec.url = server_->Url(path);
    spec.ca_bundle_pem = server_->ca_pem();
    spec.namespace_selector = {{"matchLabels", {{"ncclguard-test", namespace_}}}};
    return spec;
  }
  std::string PodsPath() const { return "/api/v1/namespaces/" + namespace_ + "/pods"; }

  // The API server picks up a new configuration asynchronously; dry-run
  // creates (which run admission and store nothing) probe until it calls us.
  bool WaitUntilCalled() {
    return Eventually(
        [&] {
          client_->Post(PodsPath() + "?dryRun=All", TrainPod("probe"));
          return server_->requests_served() > 0;
        },
        seconds(15), std::chrono::milliseconds(200));
  }

  std::unique_ptr<TestKubeClient> client_;
  std::string namespace_;
  std::unique_ptr<TestHttpsServer> server_;
  std::atomic<int> mutate_calls_{0};
};

TEST_F(WebhookTest, MutatingWebhookPatchesThePod) {
  WebhookRegistration registration(*client_, Spec(WebhookKind::Mutating, "/mutate"));
  ASSERT_TRUE(WaitUntilCalled()) << "kube-apiserver never called " << server_->Url("/mutate");

  KubeResponse created = client_->Post(PodsPath(), TrainPod("patched"));
  ASSERT_EQ(created.status, 201) << created.body;
  json stored = client_->Get(PodsPath() + "/patched").Json();
  EXPECT_EQ(stored["metadata"]["labels"]["ncclguard-patched"], "yes");
  EXPECT_EQ(stored["metadata"]["labels"]["app"], "train")
      << "the patch must keep the user's labels";
  EXPECT_GT(mutate_calls_.load(), 0);
}

TEST_F(WebhookTest, ValidatingWebhookDeniesWithItsMessage) {
  WebhookRegistration registration(*client_, Spec(WebhookKind::Validating, "/validate"));
  ASSERT_TRUE(WaitUntilCalled()) << "kube-apiserver never called " << server_->Url("/validate");

  KubeResponse denied = client_->Post(PodsPath(), TrainPod("denied"));
  EXPECT_EQ(denied.status, 403) << denied.body;
  EXPECT_NE(denied.body.find(kDenialMessage), std::string::npos) << denied.body;
  EXPECT_EQ(client_->Get(PodsPath() + "/denied").status, 404);
}

TEST_F(WebhookTest, NamespaceSelectorLeavesOtherNamespacesAlone) {
  WebhookRegistration registration(*client_, Spec(WebhookKind::Validating, "/validate"));
  ASSERT_TRUE(WaitUntilCalled());
  std::string other = CreateTestNamespace(*client_, "webhook-other");
  int calls_before = server_->requests_served();
  KubeResponse created = client_->Post("/api/v1/namespaces/" + other + "/pods", TrainPod("free"));
  EXPECT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(server_->requests_served(), calls_before);
  client_->Delete("/api/v1/namespaces/" + other);
}

TEST_F(WebhookTest, DeletedRegistrationStopsTheCalls) {
  {
    WebhookRegistration registration(*client_, Spec(WebhookKind::Validating, "/validate"));
    ASSERT_TRUE(WaitUntilCalled());
    EXPECT_EQ(client_->Get(registration.Path()).status, 200);
  }
  EXPECT_TRUE(Eventually(
      [&] { return client_->Post(PodsPath(), TrainPod("allowed")).status == 201; }, seconds(15)))
      << "pods were still denied after the configuration was deleted";
}

TEST(WebhookConfigurationTest, CarriesUrlCaBundleAndPolicy) {
  WebhookSpec spec;
  spec.kind = WebhookKind::Validating;
  spec.name = "unit";
  spec.url = "https://127.0.0.1:9443/validate";
  spec.ca_bundle_pem = "-----BEGIN CERTIFICATE-----\n";
  spec.failure_policy = "Ignore";
  spec.timeout_seconds = 3;
  json config = WebhookConfiguration(spec);
  EXPECT_EQ(config["kind"], "ValidatingWebhookConfiguration");
  const json& webhook = config["webhooks"][0];
  EXPECT_EQ(webhook["name"], "unit.ncclguard.test");
  EXPECT_EQ(webhook["clientConfig"]["url"], spec.url);
  EXPECT_EQ(webhook["clientConfig"]["caBundle"], Base64(spec.ca_bundle_pem));
  EXPECT_EQ(webhook["failurePolicy"], "Ignore");
  EXPECT_EQ(webhook["sideEffects"], "None");
  EXPECT_EQ(webhook["timeoutSeconds"], 3);
  EXPECT_EQ(Base64("ncclguard"), "bmNjbGd1YXJk");
}

}  // namespace
}  // namespace ncclguard::testenv
