// The preflight AdmissionCheck (controllers/kueue_check.h) over Workloads shaped as Kueue
// v0.17 writes them: the answer follows the gate's node count and message, only our entry is
// applied, and Retry comes after the hold timeout, never Rejected.
#include <gtest/gtest.h>

#include <variant>

#include "controllers/gate.h"
#include "controllers/kueue_check.h"
#include "core/errors.h"
#include "core/policy.h"
#include "tests/unit/controllers/fake_cluster.h"

namespace ncclguard::test {
namespace {

using controllers::ApplyObject;
using controllers::ReconcileResult;
using namespace std::chrono_literals;

const controllers::Timestamp kReserved =
    controllers::Timestamp(std::chrono::seconds(1'800'000'000));

Json GpuTemplate() {
  return {
      {"spec",
       {{"containers", Json::array({{{"name", "trainer"},
                                     {"image", "trainer:1"},
                                     {"resources", {{"limits", {{"nvidia.com/gpu", "8"}}}}}}})}}}};
}

// A PyTorchJob's Workload with quota reserved on flavor "p5" for its Master (1 pod) and Worker
// (3 pods) pod sets, plus a CPU-only "launcher" pod set; status.admissionChecks lists our check
// "preflight" and another controller's "other".
Json QueuedWorkload() {
  Json cpu = {{"spec", {{"containers", Json::array({{{"name", "l"}, {"image", "l:1"}}})}}}};
  Json workload = {
      {"apiVersion", "kueue.x-k8s.io/v1beta2"},
      {"kind", "Workload"},
      {"metadata", {{"name", "pytorchjob-llama-1a2b3"}, {"namespace", "ml"}, {"uid", "u1"}}},
      {"spec",
       {{"queueName", "team-a"},
        {"podSets", Json::array({{{"name", "master"}, {"count", 1}, {"template", GpuTemplate()}},
                                 {{"name", "worker"}, {"count", 3}, {"template", GpuTemplate()}},
                                 {{"name", "launcher"}, {"count", 1}, {"template", cpu}}})}}},
      {"status",
       {{"conditions", Json::array({{{"type", "QuotaReserved"},
                                     {"status", "True"},
                                     {"reason", "QuotaReserved"},
                                     {"lastTransitionTime", controllers::FormatTime(kReserved)}}})},
        {"admission",
         {{"clusterQueue", "cq"},
          {"podSetAssignments",
           Json::array({{{"name", "master"}, {"count", 1}, {"flavors", {{"nvidia.com/gpu", "p5"}}}},
                        {{"name", "worker"}, {"count", 3}, {"flavors", {{"nvidia.com/gpu", "p5"}}}},
                        {{"name", "launcher"}, {"count", 1}, {"flavors", {{"cpu", "cpu"}}}}})}}},
        {"admissionChecks",
         Json::array({{{"name", "other"},
                       {"state", "Pending"},
                       {"message", ""},
                       {"lastTransitionTime", controllers::FormatTime(kReserved)}},
                      {{"name", "preflight"},
                       {"state", "Pending"},
                       {"message", ""},
                       {"lastTransitionTime", controllers::FormatTime(kReserved)}}})}}}};
  return workload;
}

class KueueCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    objects_.preflight_checks = {"preflight"};
    objects_.flavor = [](std::string_view name) -> std::optional<Json> {
      if (name == "p5") {
        return Json{
            {"metadata", {{"name", "p5"}}},
            {"spec", {{"nodeLabels", {{"node.kubernetes.io/instance-type", "p5.48xlarge"}}}}}};
      }
      if (name == "cpu") return Json{{"metadata", {{"name", "cpu"}}}, {"spec", Json::object()}};
      return std::nullopt;
    };
  }

  ReconcileResult Reconcile(const Json& workload, std::chrono::seconds after = 60s) {
    return controllers::ReconcileWorkloadChecks(workload, objects_, cluster_, kReserved + after);
  }

  // The single entry a result applies, after checking the apply's shape.
  static Json AppliedEntry(const ReconcileResult& result) {
    EXPECT_EQ(result.actions.size(), 1u);
    if (result.actions.size() != 1) return nullptr;
    const auto* apply = std::get_if<ApplyObject>(&result.actions[0]);
    EXPECT_NE(apply, nullptr);
    if (apply == nullptr) return nullptr;
    EXPECT_TRUE(apply->status_subresource);
    EXPECT_EQ(apply->field_manager, controllers::kKueueFieldManager);
    EXPECT_EQ(apply->target.resource, "workloads");
    EXPECT_EQ(apply->target.namespace_, "ml");
    EXPECT_EQ(apply->object["apiVersion"], "kueue.x-k8s.io/v1beta2");
    // Only our entry: Kueue's and other controllers' entries are not named, so not touched.
    const Json& entries = apply->object["status"]["admissionChecks"];
    EXPECT_EQ(entries.size(), 1u);
    EXPECT_EQ(apply->object["status"].size(), 1u);
    return entries.empty() ? Json(nullptr) : entries[0];
  }

  // `workload` with `entry` merged in as the API server would after the apply.
  static Json WithEntry(Json workload, const Json& entry) {
    for (Json& current : workload["status"]["admissionChecks"]) {
      if (current["name"] == entry["name"]) current = entry;
    }
    return workload;
  }

  std::vector<controllers::NodeDemand> Demands() { return {{"p5.48xlarge", 4}}; }

  FakeCluster cluster_;
  controllers::KueueObjects objects_;
};

TEST(KueueKeys, ParseBackTheirText) {
  EXPECT_EQ(controllers::WorkloadKey::Parse("ml/wl")->ToString(), "ml/wl");
  EXPECT_FALSE(controllers::WorkloadKey::Parse("wl"));
  EXPECT_FALSE(controllers::WorkloadKey::Parse("a/b/c"));
  EXPECT_FALSE(controllers::WorkloadKey::Parse("/b"));
  EXPECT_EQ(controllers::AdmissionCheckKey::Parse("preflight")->name, "preflight");
  EXPECT_FALSE(controllers::AdmissionCheckKey::Parse("a/b"));
}

TEST(KueueAdmissionCheck, OursIsMadeActiveOnceOthersNever) {
  const auto now = kReserved;
  Json check = {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
                {"kind", "AdmissionCheck"},
                {"metadata", {{"name", "preflight"}, {"generation", 2}}},
                {"spec", {{"controllerName", "ncclguard.io/preflight"}}}};
  ReconcileResult result = controllers::ReconcileAdmissionCheck(check, now);
  ASSERT_EQ(result.actions.size(), 1u);
  const auto& apply = std::get<ApplyObject>(result.actions[0]);
  EXPECT_TRUE(apply.status_subresource);
  EXPECT_EQ(apply.target.resource, "admissionchecks");
  const Json condition = apply.object["status"]["conditions"][0];
  EXPECT_EQ(condition["type"], "Active");
  EXPECT_EQ(condition["status"], "True");
  EXPECT_EQ(condition["observedGeneration"], 2);

  check["status"]["conditions"] = Json::array({condition});
  EXPECT_TRUE(controllers::ReconcileAdmissionCheck(check, now + 10s).actions.empty());
  check["metadata"]["generation"] = 3;  // a changed spec is observed again
  EXPECT_EQ(controllers::ReconcileAdmissionCheck(check, now).actions.size(), 1u);

  Json other = check;
  other["spec"]["controllerName"] = "kueue.x-k8s.io/provisioning-request";
  other["status"].erase("conditions");
  EXPECT_TRUE(controllers::ReconcileAdmissionCheck(other, now).actions.empty());
  EXPECT_TRUE(controllers::ReconcileAdmissionCheck(std::nullopt, now).actions.empty());
}

TEST_F(KueueCheck, NothingBeforeQuotaIsReservedOrForOtherChecks) {
  Json workload = QueuedWorkload();
  workload["status"]["conditions"][0]["status"] = "False";
  EXPECT_TRUE(Reconcile(workload).actions.empty());
  // Being evicted (Kueue reset the entry to Pending and releases the quota next): Kueue's.
  Json evicted = QueuedWorkload();
  evicted["status"]["conditions"].push_back(
      {{"type", "Evicted"}, {"status", "True"}, {"reason", "AdmissionCheck"}});
  EXPECT_TRUE(Reconcile(evicted, 99999s).actions.empty());
  objects_.preflight_checks = {"someone-else"};
  EXPECT_TRUE(Reconcile(QueuedWorkload()).actions.empty());
  EXPECT_TRUE(Reconcile(Json(nullptr)).actions.empty());
}

TEST_F(KueueCheck, PendingWithTheGatesMessageWhileANodeFails) {
  for (int i = 0; i < 3; ++i) cluster_.AddNode("node-" + std::to_string(i), "p5.48xlarge", "Pass");
  cluster_.AddNode("node-x", "p5.48xlarge", "Fail", EfaFailure());
  const ReconcileResult result = Reconcile(QueuedWorkload(), 60s);
  const Json entry = AppliedEntry(result);
  EXPECT_EQ(entry["name"], "preflight");
  EXPECT_EQ(entry["state"], "Pending");
  // The gate's own message (its node count and link), from the flavor's instance type.
  const auto verdict = controllers::EvaluateGate(Demands(), cluster_, cluster_.Policy());
  EXPECT_EQ(entry["message"], verdict.message);
  EXPECT_NE(entry["message"].get<std::string>().find(
                "3/4 p5.48xlarge nodes validated; node node-x failed efa-device-count"),
            std::string::npos);
  EXPECT_FALSE(entry.contains("podSetUpdates"));
  // Rechecked when the hold timeout ends (the node events requeue it before).
  ASSERT_TRUE(result.requeue_after);
  EXPECT_EQ(*result.requeue_after,
            std::chrono::seconds(cluster_.Policy().gate.hold_timeout_seconds) - 60s);

  // Applied: reconciling again changes nothing.
  EXPECT_TRUE(Reconcile(WithEntry(QueuedWorkload(), entry), 90s).actions.empty());
}

TEST_F(KueueCheck, ReadyWithTheValidatedNodeSelectorOnTheGpuPodSets) {
  for (int i = 0; i < 4; ++i) cluster_.AddNode("node-" + std::to_string(i), "p5.48xlarge", "Pass");
  Json pending = QueuedWorkload();
  pending["status"]["admissionChecks"][1]["message"] = "1/4 p5.48xlarge nodes validated";
  const Json entry = AppliedEntry(Reconcile(pending));
  EXPECT_EQ(entry["state"], "Ready");
  EXPECT_EQ(entry["lastTransitionTime"], controllers::FormatTime(kReserved + 60s));
  const Json selector = {{"ncclguard.io/validated", "true"}};
  EXPECT_EQ(entry["podSetUpdates"],
            Json::array({{{"name", "master"}, {"nodeSelector", selector}},
                         {{"name", "worker"}, {"nodeSelector", selector}}}));
  // Ready stays Ready while the quota is held, even when a node fails later.
  cluster_.AddNode("node-0", "p5.48xlarge", "Fail", EfaFailure());
  EXPECT_TRUE(Reconcile(WithEntry(QueuedWorkload(), entry), 120s).actions.empty());
}

// HyperPod task governance: flavors name the nodes' "ml." types; the pods (8 GPUs each) are sized
// from the catalog all the same, so 4 pods need 4 nodes, counted where the flavor sends them.
TEST_F(KueueCheck, AFlavorOfHyperPodNodesIsSizedFromTheCatalog) {
  objects_.flavor = [](std::string_view name) -> std::optional<Json> {
    if (name != "p5") return std::nullopt;
    return Json{
        {"metadata", {{"name", "p5"}}},
        {"spec", {{"nodeLabels", {{"node.kubernetes.io/instance-type", "ml.p5.48xlarge"}}}}}};
  };
  for (int i = 0; i < 3; ++i) {
    cluster_.AddNode("hp-" + std::to_string(i), "ml.p5.48xlarge", "Pass");
  }
  cluster_.AddNode("ec2-0", "p5.48xlarge", "Pass");  // not where the flavor sends the pods
  Json pending = QueuedWorkload();
  pending["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]
         ["nvidia.com/gpu"] = "4";
  pending["spec"]["podSets"][0]["count"] = 2;  // 2 x 4 GPUs pack onto one node
  const Json entry = AppliedEntry(Reconcile(pending));
  EXPECT_EQ(entry["state"], "Pending");
  EXPECT_NE(entry["message"].get<std::string>().find("3/4 ml.p5.48xlarge nodes validated"),
            std::string::npos)
      << entry["message"];
  cluster_.AddNode("hp-3", "ml.p5.48xlarge", "Pass");
  EXPECT_EQ(AppliedEntry(Reconcile(pending))["state"], "Ready");
}

TEST_F(KueueCheck, TheInstanceTypeComesFromThePodSetsNodeSelectorWithoutFlavorLabels) {
  objects_.flavor = [](std::string_view) -> std::optional<Json> { return std::nullopt; };
  Json workload = QueuedWorkload();
  for (Json& pod_set : workload["spec"]["podSets"]) {
    pod_set["template"]["spec"]["nodeSelector"] = {
        {"node.kubernetes.io/instance-type", "p5.48xlarge"}};
  }
  cluster_.AddNode("node-0", "p5.48xlarge", "Pass");
  const Json entry = AppliedEntry(Reconcile(workload));
  EXPECT_EQ(entry["state"], "Pending");
  EXPECT_NE(entry["message"].get<std::string>().find("1/4 p5.48xlarge nodes validated"),
            std::string::npos);
}

TEST_F(KueueCheck, RetryAfterTheHoldTimeoutNeverRejected) {
  cluster_.policy().gate.hold_timeout_seconds = 300;
  cluster_.policy().gate.retry_after_seconds = 45;
  cluster_.AddNode("node-x", "p5.48xlarge", "Fail", EfaFailure());
  EXPECT_EQ(AppliedEntry(Reconcile(QueuedWorkload(), 299s))["state"], "Pending");
  const Json entry = AppliedEntry(Reconcile(QueuedWorkload(), 300s));
  EXPECT_EQ(entry["state"], "Retry");
  EXPECT_EQ(entry["requeueAfterSeconds"], 45);
  EXPECT_NE(entry["message"].get<std::string>().find("0/4 p5.48xlarge nodes validated"),
            std::string::npos);
  // Kueue acts on Retry (evicts, resets it to Pending); we do not touch it meanwhile.
  EXPECT_TRUE(Reconcile(WithEntry(QueuedWorkload(), entry), 900s).actions.empty());
}

TEST_F(KueueCheck, AnUnreadableWorkloadIsPendingWithWhy) {
  Json workload = QueuedWorkload();
  workload["spec"]["podSets"][1]["template"] = "not a template";
  const Json entry = AppliedEntry(Reconcile(workload));
  EXPECT_EQ(entry["state"], "Pending");
  EXPECT_NE(entry["message"].get<std::string>().find("cannot read the Workload's pod sets"),
            std::string::npos);
}

TEST_F(KueueCheck, TheGateTurnedOffAnswersReadyWithoutUpdates) {
  cluster_.policy().gate.enabled = false;
  const Json entry = AppliedEntry(Reconcile(QueuedWorkload()));
  EXPECT_EQ(entry["state"], "Ready");
  EXPECT_FALSE(entry.contains("podSetUpdates"));
}

TEST(KueuePolicy, HoldTimeoutAndDeferToKueueAreReadAndChecked) {
  const core::Policy policy = core::ParsePolicy(
      "spec:\n  gate:\n    deferToKueue: false\n    holdTimeoutSeconds: 120\n"
      "    retryAfterSeconds: 30\n");
  EXPECT_FALSE(policy.gate.defer_to_kueue);
  EXPECT_EQ(policy.gate.hold_timeout_seconds, 120);
  EXPECT_EQ(policy.gate.retry_after_seconds, 30);
  EXPECT_TRUE(core::Policy::Defaults().gate.defer_to_kueue);
  EXPECT_THROW(core::ParsePolicy("spec:\n  gate:\n    holdTimeoutSeconds: 0\n"), core::PolicyError);
  EXPECT_THROW(core::ParsePolicy("spec:\n  gate:\n    retryAfterSeconds: soon\n"),
               core::PolicyError);
}

}  // namespace
}  // namespace ncclguard::test
