// End to end through the real kube-apiserver: the API server calls ncclguard's webhook server
// (running in this process) over TLS through Mutating and Validating webhook configurations
// that select namespaces labelled ncclguard.io/enabled=true and route them by their
// ncclguard.io/mode label, as the Helm chart registers them.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "controlplane_env.h"
#include "core/guide.h"
#include "core/policy.h"
#include "manifests.h"
#include "process.h"
#include "served_webhook.h"
#include "test_kube_client.h"
#include "webhook_registration.h"

namespace ncclguard::webhook::testing {
namespace {

using nlohmann::json;
using std::chrono::seconds;
using testenv::ControlPlaneEnvironment;
using testenv::Eventually;
using testenv::KubeResponse;
using testenv::TestKubeClient;
using testenv::WebhookKind;
using testenv::WebhookRegistration;
using testenv::WebhookSpec;

json Rule(const std::string& group, const std::string& version, const std::string& resource,
          const json& operations) {
  return {{"apiGroups", {group}},
          {"apiVersions", {version}},
          {"operations", operations},
          {"resources", {resource}},
          {"scope", "Namespaced"}};
}

json Rules(bool validating) {
  const json job_operations = validating ? json{"CREATE", "UPDATE"} : json{"CREATE"};
  return json::array({Rule("", "v1", "pods", {"CREATE"}),
                      Rule("batch", "v1", "jobs", job_operations),
                      Rule("kubeflow.org", "v1", "pytorchjobs", job_operations),
                      Rule("kubeflow.org", "v2beta1", "mpijobs", job_operations),
                      Rule("jobset.x-k8s.io", "v1alpha2", "jobsets", job_operations)});
}

json BarePod(const std::string& name) {
  return json::parse(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
                     R"(","labels":{"app":"train"}},"spec":{
    "nodeSelector":{"node.kubernetes.io/instance-type":"p5.48xlarge"},
    "containers":[{"name":"pytorch","image":"registry.example/train:1.0",
      "env":[{"name":"NCCL_DEBUG","value":"WARN"}],
      "resources":{"limits":{"nvidia.com/gpu":"8","memory":"1000Gi"}}}]}})");
}

json PyTorchJob(const std::string& name, const std::string& proto) {
  return json::parse(R"({"apiVersion":"kubeflow.org/v1","kind":"PyTorchJob","metadata":{"name":")" +
                     name + R"("},"spec":{"pytorchReplicaSpecs":{"Worker":{"replicas":2,
    "template":{"spec":{"nodeSelector":{"node.kubernetes.io/instance-type":"p5.48xlarge"},
      "containers":[{"name":"pytorch","image":"registry.example/train:1.0",
        "env":[{"name":"NCCL_PROTO","value":")" +
                     proto + R"("}],
        "resources":{"limits":{"nvidia.com/gpu":"8","memory":"1000Gi"}}}]}}}}}})");
}

json FindEnv(const json& container, const std::string& name) {
  for (const auto& var : container.value("env", json::array())) {
    if (var.value("name", "") == name) return var.value("value", json());
  }
  return nullptr;
}

class WebhookEndToEnd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    client_ = new TestKubeClient(ControlPlaneEnvironment::Info());
    for (const char* kind : {"PyTorchJob", "MPIJob", "JobSet"}) {
      testenv::ApplyCrds(*client_, testenv::JobCrd(kind));
    }
    // The policy is a file the server reloads when it changes, as `ncclguard webhook
    // --policy-file` reads a mounted NcclPolicy: empty, the defaults (enforce).
    policy_file_ = testenv::MakeTempDir("ncclguard-e2e-policy") + "/policy.yaml";
    WriteFile(policy_file_, "");
    webhook_ = new ServedWebhook([](ServerConfig& config) {
      config.policy_files = {policy_file_};
      config.load_policy = [] {
        std::ifstream in(policy_file_);
        std::stringstream text;
        text << in.rdbuf();
        return core::ParsePolicy(text.str());
      };
    });
    for (const testenv::ChartWebhookEntry& entry : testenv::ChartWebhookEntries()) {
      WebhookSpec spec;
      spec.kind = entry.kind;
      spec.name = entry.name;
      spec.url = webhook_->Url(entry.path);
      spec.ca_bundle_pem = webhook_->ca_pem();
      spec.rules = Rules(entry.kind == WebhookKind::Validating);
      spec.namespace_selector = {{"matchLabels", {{"ncclguard.io/enabled", "true"}}},
                                 {"matchExpressions", json::array({entry.mode_expression})}};
      spec.failure_policy = entry.failure_policy;
      spec.timeout_seconds = 10;
      registrations_.push_back(std::make_unique<WebhookRegistration>(*client_, spec));
    }
    enabled_ = testenv::CreateTestNamespace(*client_, "e2e", {{"ncclguard.io/enabled", "true"}});
    // The API server loads webhook configurations asynchronously: probe with dry-run creates
    // until one comes back fixed.
    const bool ready = Eventually(
        [] {
          KubeResponse probe = client_->Post(PodsPath(enabled_) + "?dryRun=All", BarePod("probe"));
          return probe.status == 201 &&
                 probe.Json()["spec"]["containers"][0]["resources"]["limits"].contains(
                     "vpc.amazonaws.com/efa");
        },
        seconds(30), std::chrono::milliseconds(200));
    ASSERT_TRUE(ready) << "kube-apiserver never called the webhook";
  }
  static void TearDownTestSuite() {
    registrations_.clear();
    if (client_ && !enabled_.empty()) client_->Delete("/api/v1/namespaces/" + enabled_);
    delete webhook_;
    delete client_;
  }

  static std::string PodsPath(const std::string& ns) {
    return "/api/v1/namespaces/" + ns + "/pods";
  }

  // kubectl as a job submitter runs it; the manifest goes through a file like theirs would.
  static testenv::ProcessResult Kubectl(const std::string& verb, const json& manifest,
                                        const std::string& ns) {
    const auto& info = ControlPlaneEnvironment::Info();
    const std::string file =
        webhook_->dir() + "/manifest-" + manifest["metadata"]["name"].get<std::string>() + ".json";
    WriteFile(file, manifest.dump(2));
    return testenv::RunProcess(
        {info.bin_dir + "/kubectl", "--kubeconfig", info.kubeconfig, verb, "-n", ns, "-f", file});
  }

  // Writes the policy file; the server reads it on its next request after the reload interval.
  static void WritePolicy(const std::string& yaml) { WriteFile(policy_file_, yaml); }

  static std::string JobPath(const std::string& ns, const std::string& name) {
    return "/apis/kubeflow.org/v1/namespaces/" + ns + "/pytorchjobs/" + name;
  }

  static TestKubeClient* client_;
  static ServedWebhook* webhook_;
  static std::vector<std::unique_ptr<WebhookRegistration>> registrations_;
  static std::string enabled_;
  static std::string policy_file_;
};

TestKubeClient* WebhookEndToEnd::client_ = nullptr;
ServedWebhook* WebhookEndToEnd::webhook_ = nullptr;
std::vector<std::unique_ptr<WebhookRegistration>> WebhookEndToEnd::registrations_;
std::string WebhookEndToEnd::enabled_;
std::string WebhookEndToEnd::policy_file_;

TEST_F(WebhookEndToEnd, APodMissingEfaIpcLockEnvAndShmIsStoredFixed) {
  KubeResponse created = client_->Post(PodsPath(enabled_), BarePod("fixed"));
  ASSERT_EQ(created.status, 201) << created.body;
  const json stored = client_->Get(PodsPath(enabled_) + "/fixed").Json();
  const json& container = stored["spec"]["containers"][0];
  EXPECT_EQ(container["resources"]["limits"]["vpc.amazonaws.com/efa"], "32");
  EXPECT_EQ(container["resources"]["requests"]["vpc.amazonaws.com/efa"], "32");
  EXPECT_EQ(container["securityContext"]["capabilities"]["add"], json::array({"IPC_LOCK"}));
  EXPECT_EQ(FindEnv(container, "FI_PROVIDER"), "efa");
  EXPECT_EQ(FindEnv(container, "FI_EFA_USE_DEVICE_RDMA"), "1");
  EXPECT_EQ(FindEnv(container, "TORCH_NCCL_ASYNC_ERROR_HANDLING"), "1");
  bool shm = false;
  for (const auto& mount : container["volumeMounts"]) shm = shm || mount["mountPath"] == "/dev/shm";
  EXPECT_TRUE(shm);
  // What the user wrote is still there.
  EXPECT_EQ(FindEnv(container, "NCCL_DEBUG"), "WARN");
  EXPECT_EQ(stored["metadata"]["labels"]["app"], "train");
  EXPECT_EQ(container["resources"]["limits"]["memory"], "1000Gi");
}

TEST_F(WebhookEndToEnd, APyTorchJobWithAnUnknownProtocolIsDeniedWithOurMessage) {
  const testenv::ProcessResult result =
      Kubectl("create", PyTorchJob("bad-proto", "fast"), enabled_);
  EXPECT_NE(result.exit_code, 0);
  const std::string& err = result.stderr_text;
  EXPECT_NE(err.find("admission webhook \"validate.ncclguard.test\" denied the request"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("ncclguard denied PyTorchJob " + enabled_ + "/bad-proto"), std::string::npos)
      << err;
  EXPECT_NE(err.find("[nccl-proto-invalid]"), std::string::npos) << err;
  EXPECT_NE(err.find(core::GuideLink(core::kDefaultGuideBaseUrl, "efa-config")), std::string::npos)
      << err;
  EXPECT_EQ(client_->Get("/apis/kubeflow.org/v1/namespaces/" + enabled_ + "/pytorchjobs/bad-proto")
                .status,
            404);
}

TEST_F(WebhookEndToEnd, AJobWithWarnFindingsIsAdmittedWithTheWarningsShownToTheClient) {
  json job = json::parse(R"({"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"warned"},
    "spec":{"template":{"spec":{"restartPolicy":"Never",
      "nodeSelector":{"node.kubernetes.io/instance-type":"p5.48xlarge"},
      "containers":[{"name":"pytorch","image":"registry.example/train:latest",
        "resources":{"limits":{"nvidia.com/gpu":"8"}}}]}}}})");
  const testenv::ProcessResult result = Kubectl("create", job, enabled_);
  EXPECT_EQ(result.exit_code, 0) << result.stderr_text;
  EXPECT_NE(result.stderr_text.find("Warning: ncclguard image-unpinned:"), std::string::npos)
      << result.stderr_text;
  EXPECT_NE(result.stderr_text.find("Warning: ncclguard memory-limit-missing:"), std::string::npos)
      << result.stderr_text;
  EXPECT_EQ(client_->Get("/apis/batch/v1/namespaces/" + enabled_ + "/jobs/warned").status, 200);
}

TEST_F(WebhookEndToEnd, AServerSideDryRunIsFixedButNotStored) {
  KubeResponse dry = client_->Post(PodsPath(enabled_) + "?dryRun=All", BarePod("dry"));
  ASSERT_EQ(dry.status, 201) << dry.body;
  EXPECT_EQ(dry.Json()["spec"]["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"],
            "32");
  EXPECT_EQ(client_->Get(PodsPath(enabled_) + "/dry").status, 404);
}

TEST_F(WebhookEndToEnd, ANamespaceWithoutTheLabelIsLeftUntouched) {
  const std::string plain = testenv::CreateTestNamespace(*client_, "plain");
  KubeResponse created = client_->Post(PodsPath(plain), BarePod("untouched"));
  ASSERT_EQ(created.status, 201) << created.body;
  const json stored = client_->Get(PodsPath(plain) + "/untouched").Json();
  EXPECT_FALSE(
      stored["spec"]["containers"][0]["resources"]["limits"].contains("vpc.amazonaws.com/efa"));
  EXPECT_FALSE(stored["spec"]["containers"][0].contains("securityContext"));
  // A job ncclguard would deny is admitted there too.
  EXPECT_EQ(Kubectl("create", PyTorchJob("anything", "fast"), plain).exit_code, 0);
  client_->Delete("/api/v1/namespaces/" + plain);
}

TEST_F(WebhookEndToEnd, AManagedJobIsSuspendedAndMarkedForTheGate) {
  KubeResponse created =
      client_->Post("/apis/kubeflow.org/v1/namespaces/" + enabled_ + "/pytorchjobs",
                    PyTorchJob("gated", "Simple"));
  ASSERT_EQ(created.status, 201) << created.body;
  const json stored =
      client_->Get("/apis/kubeflow.org/v1/namespaces/" + enabled_ + "/pytorchjobs/gated").Json();
  EXPECT_EQ(stored["spec"]["runPolicy"]["suspend"], true);
  EXPECT_EQ(stored["metadata"]["annotations"]["ncclguard.io/gate"], "pending");
  // The controller's release (an UPDATE) is admitted.
  const json release = {{"spec", {{"runPolicy", {{"suspend", false}}}}},
                        {"metadata", {{"annotations", {{"ncclguard.io/gate", "admitted"}}}}}};
  KubeResponse patched = client_->Request(
      "PATCH", "/apis/kubeflow.org/v1/namespaces/" + enabled_ + "/pytorchjobs/gated",
      release.dump(), "application/merge-patch+json");
  EXPECT_EQ(patched.status, 200) << patched.body;
}

// Audit mode (docs/operator.md "Audit mode"): a namespace labelled ncclguard.io/mode=audit goes to
// /validate/audit only. What an enforcing namespace denies is stored there unchanged, not held,
// and kubectl shows why enforce mode would have denied it.
TEST_F(WebhookEndToEnd, AnAuditNamespaceAdmitsWhatEnforceDeniesAndKubectlShowsWhy) {
  const std::string audit = testenv::CreateTestNamespace(
      *client_, "audit", {{"ncclguard.io/enabled", "true"}, {"ncclguard.io/mode", "audit"}});
  const testenv::ProcessResult denied = Kubectl("create", PyTorchJob("proto", "fast"), enabled_);
  EXPECT_NE(denied.exit_code, 0) << "the enforcing namespace denies it";

  // The API server learns a new namespace's labels from its informer: wait until the namespace
  // is routed to the audit entry.
  ASSERT_TRUE(Eventually(
      [&] {
        KubeResponse probe =
            client_->Post("/apis/kubeflow.org/v1/namespaces/" + audit + "/pytorchjobs?dryRun=All",
                          PyTorchJob("probe", "fast"));
        return probe.status == 201;
      },
      seconds(15), std::chrono::milliseconds(200)));
  const testenv::ProcessResult admitted = Kubectl("create", PyTorchJob("proto", "fast"), audit);
  EXPECT_EQ(admitted.exit_code, 0) << admitted.stderr_text;
  const std::string& err = admitted.stderr_text;
  EXPECT_NE(err.find("Warning: ncclguard audit: would deny: [nccl-proto-invalid] "),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("(" + core::GuideLink(core::kDefaultGuideBaseUrl, "efa-config") + ")"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("Warning: ncclguard audit: would fix: [efa-resources-missing] "),
            std::string::npos)
      << err;
  // Stored as written: no gate mark, not suspended.
  const json stored = client_->Get(JobPath(audit, "proto")).Json();
  EXPECT_FALSE(stored["metadata"].contains("annotations") &&
               stored["metadata"]["annotations"].contains("ncclguard.io/gate"))
      << stored.dump();
  EXPECT_FALSE(stored["spec"].contains("runPolicy")) << stored.dump();
  // A pod is stored unfixed (no mutating entry selects the namespace).
  KubeResponse pod = client_->Post(PodsPath(audit), BarePod("unfixed"));
  ASSERT_EQ(pod.status, 201) << pod.body;
  EXPECT_FALSE(
      pod.Json()["spec"]["containers"][0]["resources"]["limits"].contains("vpc.amazonaws.com/efa"));
  client_->Delete("/api/v1/namespaces/" + audit);
}

// The policy's spec.mode switches the plain paths to audit and back without a restart; a
// namespace labelled ncclguard.io/mode=enforce stays enforced throughout.
TEST_F(WebhookEndToEnd, ThePolicysModeSwitchesWithoutARestartAndAnEnforceNamespaceStaysEnforced) {
  const std::string enforce = testenv::CreateTestNamespace(
      *client_, "enforce", {{"ncclguard.io/enabled", "true"}, {"ncclguard.io/mode", "enforce"}});
  struct RestorePolicy {
    ~RestorePolicy() { WritePolicy(""); }
  } restore;
  WritePolicy(
      "apiVersion: ncclguard.io/v1alpha1\nkind: NcclPolicy\nmetadata: {name: default}\n"
      "spec: {mode: audit}\n");
  int attempt = 0;
  // The server rereads the file on the first request after it changed.
  ASSERT_TRUE(Eventually(
      [&] {
        KubeResponse probe = client_->Post(
            "/apis/kubeflow.org/v1/namespaces/" + enabled_ + "/pytorchjobs?dryRun=All",
            PyTorchJob("switch-" + std::to_string(attempt++), "fast"));
        return probe.status == 201;
      },
      seconds(15), std::chrono::milliseconds(100)))
      << "the policy's audit mode never took effect";
  const testenv::ProcessResult audited = Kubectl("create", PyTorchJob("audited", "fast"), enabled_);
  EXPECT_EQ(audited.exit_code, 0) << audited.stderr_text;
  EXPECT_NE(audited.stderr_text.find("Warning: ncclguard audit: would deny: [nccl-proto-invalid]"),
            std::string::npos)
      << audited.stderr_text;
  const json stored = client_->Get(JobPath(enabled_, "audited")).Json();
  EXPECT_FALSE(stored["spec"].contains("runPolicy")) << "not suspended: " << stored.dump();

  // The enforce namespace, under the audit policy: denied by its own entry, and fixed.
  const testenv::ProcessResult denied = Kubectl("create", PyTorchJob("proto", "fast"), enforce);
  EXPECT_NE(denied.exit_code, 0);
  EXPECT_NE(denied.stderr_text.find(
                "admission webhook \"validate-enforce.ncclguard.test\" denied the request"),
            std::string::npos)
      << denied.stderr_text;
  KubeResponse pod = client_->Post(PodsPath(enforce), BarePod("fixed"));
  ASSERT_EQ(pod.status, 201) << pod.body;
  EXPECT_EQ(pod.Json()["spec"]["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"],
            "32");
  KubeResponse gated = client_->Post("/apis/kubeflow.org/v1/namespaces/" + enforce + "/pytorchjobs",
                                     PyTorchJob("gated", "Simple"));
  ASSERT_EQ(gated.status, 201) << gated.body;
  EXPECT_EQ(gated.Json()["metadata"]["annotations"]["ncclguard.io/gate"], "pending");

  // Back to enforce: the plain namespace denies again.
  WritePolicy("mode: enforce\n");
  ASSERT_TRUE(Eventually(
      [&] {
        KubeResponse probe = client_->Post(
            "/apis/kubeflow.org/v1/namespaces/" + enabled_ + "/pytorchjobs?dryRun=All",
            PyTorchJob("back-" + std::to_string(attempt++), "fast"));
        return probe.status == 403;
      },
      seconds(15), std::chrono::milliseconds(100)))
      << "the switch back to enforce never took effect";
  client_->Delete("/api/v1/namespaces/" + enforce);
}

}  // namespace
}  // namespace ncclguard::webhook::testing
