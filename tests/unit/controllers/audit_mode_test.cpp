// Audit mode in the gate and the Kueue AdmissionCheck (docs/operator.md "Audit mode"): nothing is
// held; the job's NcclPreflight condition, an Event and the check's message say what would have
// been held and why.
#include <gtest/gtest.h>

#include <variant>

#include "controllers/gate.h"
#include "controllers/kueue_check.h"
#include "controllers/training_job_reconciler.h"
#include "core/contract.h"
#include "tests/unit/controllers/fake_cluster.h"

namespace ncclguard::test::audit_mode_test {
namespace {

using controllers::Action;
using controllers::ApplyObject;
using controllers::MergePatch;
using controllers::ReconcileTrainingJob;
using controllers::RecordEvent;
using controllers::Timestamp;
using core::WorkloadKind;
using namespace std::chrono_literals;

const Timestamp kNow =
    std::chrono::sys_days(std::chrono::year(2026) / 12 / 2) + std::chrono::hours(14);
const std::string kModeLabel(core::kModeNamespaceLabel);

template <typename T>
std::vector<T> Only(const std::vector<Action>& actions) {
  std::vector<T> out;
  for (const Action& a : actions) {
    if (const T* t = std::get_if<T>(&a)) out.push_back(*t);
  }
  return out;
}

Json Condition(const Json& job, const std::string& type) {
  if (!job.contains("status") || !job["status"].contains("conditions")) return nullptr;
  for (const Json& c : job["status"]["conditions"]) {
    if (c["type"] == type) return c;
  }
  return nullptr;
}

bool StartsWith(const Json& text, const std::string& prefix) {
  return text.is_string() && text.get<std::string>().rfind(prefix, 0) == 0;
}

class AuditGate : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_.AddNamespace("team-a", true);
    // llama needs 4 p5 nodes; 3 pass, 1 fails.
    for (int i = 0; i < 3; ++i)
      cluster_.AddNode("node-" + std::to_string(i), "p5.48xlarge", "Pass");
    cluster_.AddNode("node-x0", "p5.48xlarge", "Fail", EfaFailure());
  }
  controllers::ReconcileResult Reconcile(Timestamp now = kNow) {
    return ReconcileTrainingJob(key_, cluster_, now);
  }
  // The job as the webhook admits it in audit mode: no gate mark, not suspended.
  void AddUnmarkedJob() { cluster_.AddJob(P5PyTorchJob("team-a", "llama", 3, false)); }
  // Reconciles and applies until nothing is left to do; returns the number of rounds.
  int Converge() {
    for (int round = 1; round <= 5; ++round) {
      const auto result = Reconcile();
      if (result.actions.empty()) return round;
      EXPECT_EQ(cluster_.Apply(result.actions), 0);
    }
    return -1;
  }
  // Only the status and the rendezvous Service are written: the job itself never.
  static void ExpectNothingHeldOrReleased(const controllers::ReconcileResult& result) {
    for (const MergePatch& p : Only<MergePatch>(result.actions)) {
      EXPECT_TRUE(p.status_subresource || p.target.kind == "Service") << p.patch.dump();
    }
  }

  FakeCluster cluster_;
  const JobKey key_{WorkloadKind::PyTorchJob, "team-a", "llama"};
};

TEST_F(AuditGate, AJobInAnAuditNamespaceIsNotHeldButToldWhatWouldHaveHeldIt) {
  cluster_.LabelNamespace("team-a", kModeLabel, "audit");
  AddUnmarkedJob();
  const auto result = Reconcile();
  ExpectNothingHeldOrReleased(result);
  EXPECT_FALSE(result.requeue_after) << "nothing is held: nothing to wait for";
  const auto events = Only<RecordEvent>(result.actions);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, "Warning");
  EXPECT_EQ(events[0].reason, "WouldHold");
  EXPECT_EQ(events[0].action, "Audit");
  EXPECT_EQ(events[0].note,
            "audit mode: ncclguard would hold this job until enough validated nodes exist, and "
            "did not: 3/4 p5.48xlarge nodes validated; node node-x0 failed efa-device-count: 30 of "
            "32 EFA devices \u2014 see "
            "https://github.com/ncclguard/ncclguard/blob/main/docs/guide.md#efa-config");
  ASSERT_EQ(cluster_.Apply(result.actions), 0);

  const Json& job = cluster_.JobObject(key_);
  const Json preflight = Condition(job, "NcclPreflight");
  EXPECT_EQ(preflight["status"], "False");
  EXPECT_EQ(preflight["reason"], "WouldHold");
  EXPECT_EQ(preflight["message"], events[0].note);
  EXPECT_FALSE(job["metadata"].contains("annotations") &&
               job["metadata"]["annotations"].contains("ncclguard.io/gate"));
  EXPECT_FALSE(job["spec"].contains("runPolicy") &&
               job["spec"]["runPolicy"].value("suspend", false));
  // The gate's diagnosis is for held jobs only.
  EXPECT_TRUE(Condition(job, "NcclDiagnosis").is_null());
  // Said once.
  EXPECT_TRUE(Reconcile().actions.empty());
}

TEST_F(AuditGate, ThePolicysAuditModeAppliesWhereNoLabelSaysOtherwise) {
  cluster_.policy().mode = core::Mode::Audit;
  AddUnmarkedJob();
  ASSERT_GT(Converge(), 0);
  EXPECT_EQ(Condition(cluster_.JobObject(key_), "NcclPreflight")["reason"], "WouldHold");
}

TEST_F(AuditGate, OnceEnoughNodesPassTheConditionSaysSoAndNothingIsReleased) {
  cluster_.LabelNamespace("team-a", kModeLabel, "audit");
  AddUnmarkedJob();
  ASSERT_GT(Converge(), 0);
  cluster_.AddNode("node-new", "p5.48xlarge", "Pass");
  const auto result = Reconcile(kNow + 1min);
  ExpectNothingHeldOrReleased(result);
  ASSERT_EQ(cluster_.Apply(result.actions), 0);
  const Json preflight = Condition(cluster_.JobObject(key_), "NcclPreflight");
  EXPECT_EQ(preflight["status"], "True");
  EXPECT_EQ(preflight["reason"], "ValidatedNodesAvailable");
  EXPECT_TRUE(StartsWith(preflight["message"], "audit mode: 4 validated p5.48xlarge nodes"))
      << preflight;
}

TEST_F(AuditGate, AnEnforceNamespaceUnderAnAuditPolicyIsHeldAsEver) {
  cluster_.policy().mode = core::Mode::Audit;
  cluster_.LabelNamespace("team-a", kModeLabel, "enforce");
  cluster_.AddJob(P5PyTorchJob("team-a", "llama", 3, true));
  const auto result = Reconcile();
  ASSERT_TRUE(result.requeue_after);
  ASSERT_EQ(cluster_.Apply(result.actions), 0);
  const Json& job = cluster_.JobObject(key_);
  EXPECT_EQ(Condition(job, "NcclPreflight")["reason"], "InsufficientValidatedNodes");
  EXPECT_EQ(job["spec"]["runPolicy"]["suspend"], true);
  EXPECT_EQ(job["metadata"]["annotations"]["ncclguard.io/gate"], "pending");
}

TEST_F(AuditGate, AJobHeldBeforeItsNamespaceTurnedToAuditIsReleasedSayingWhy) {
  cluster_.AddJob(P5PyTorchJob("team-a", "llama", 3, true));
  ASSERT_GT(Converge(), 0);
  ASSERT_EQ(cluster_.JobObject(key_)["spec"]["runPolicy"]["suspend"], true);
  cluster_.LabelNamespace("team-a", kModeLabel, "audit");
  ASSERT_GT(Converge(), 0);
  const Json& job = cluster_.JobObject(key_);
  EXPECT_EQ(job["spec"]["runPolicy"]["suspend"], false);
  EXPECT_EQ(job["metadata"]["annotations"]["ncclguard.io/gate"], "admitted");
  const Json preflight = Condition(job, "NcclPreflight");
  EXPECT_EQ(preflight["status"], "True");
  EXPECT_EQ(preflight["reason"], "AuditMode");
  EXPECT_TRUE(StartsWith(preflight["message"],
                         "audit mode: ncclguard holds nothing in this namespace; released although "
                         "enforce mode would still hold it: 3/4 p5.48xlarge nodes validated"))
      << preflight;
  // Released once; an admitted job is not judged again.
  EXPECT_TRUE(Reconcile().actions.empty());
}

TEST_F(AuditGate, NothingIsSaidWithTheGateOffOrOutsideOptedInNamespaces) {
  cluster_.LabelNamespace("team-a", kModeLabel, "audit");
  cluster_.policy().gate.enabled = false;
  AddUnmarkedJob();
  ASSERT_GT(Converge(), 0);
  EXPECT_TRUE(Condition(cluster_.JobObject(key_), "NcclPreflight").is_null());

  cluster_.policy().gate.enabled = true;
  cluster_.AddNamespace("plain", false);
  cluster_.LabelNamespace("plain", kModeLabel, "audit");
  cluster_.AddJob(P5PyTorchJob("plain", "other", 3, false));
  EXPECT_TRUE(ReconcileTrainingJob({WorkloadKind::PyTorchJob, "plain", "other"}, cluster_, kNow)
                  .actions.empty());
}

TEST(NamespaceMode, TheLabelElseThePolicy) {
  FakeCluster cluster;
  cluster.AddNamespace("a", true);
  cluster.AddNamespace("b", true);
  cluster.AddNamespace("c", true);
  cluster.LabelNamespace("a", kModeLabel, "audit");
  cluster.LabelNamespace("b", kModeLabel, "enforce");
  cluster.LabelNamespace("c", kModeLabel, "Audit");  // not a mode: the policy's
  EXPECT_EQ(controllers::NamespaceMode(cluster, "a"), core::Mode::Audit);
  EXPECT_EQ(controllers::NamespaceMode(cluster, "b"), core::Mode::Enforce);
  EXPECT_EQ(controllers::NamespaceMode(cluster, "c"), core::Mode::Enforce);
  EXPECT_EQ(controllers::NamespaceMode(cluster, "missing"), core::Mode::Enforce);
  cluster.policy().mode = core::Mode::Audit;
  EXPECT_EQ(controllers::NamespaceMode(cluster, "b"), core::Mode::Enforce);
  EXPECT_EQ(controllers::NamespaceMode(cluster, "c"), core::Mode::Audit);
  EXPECT_EQ(controllers::NamespaceMode(cluster, "missing"), core::Mode::Audit);
}

// A Workload with quota reserved for 4 p5 pods and our check "preflight" Pending.
Json QueuedWorkload() { return QueuedP5Workload("team-a", 4, kNow); }

class AuditKueue : public AuditGate {
 protected:
  void SetUp() override {
    AuditGate::SetUp();
    objects_ = P5KueueObjects();
  }
  Json Entry(const Json& workload) {
    const auto result =
        controllers::ReconcileWorkloadChecks(workload, objects_, cluster_, kNow + 1min);
    EXPECT_EQ(result.actions.size(), 1u);
    if (result.actions.size() != 1) return nullptr;
    return std::get<ApplyObject>(result.actions[0]).object["status"]["admissionChecks"][0];
  }
  controllers::KueueObjects objects_;
};

TEST_F(AuditKueue, TheCheckIsReadyAtOnceSayingWhatItWouldHaveHeld) {
  cluster_.LabelNamespace("team-a", kModeLabel, "audit");
  const Json entry = Entry(QueuedWorkload());
  EXPECT_EQ(entry["state"], "Ready");
  EXPECT_TRUE(StartsWith(entry["message"],
                         "audit mode: ncclguard would hold this Workload until enough validated "
                         "nodes exist, and did not: 3/4 p5.48xlarge nodes validated"))
      << entry;
  EXPECT_FALSE(entry.contains("podSetUpdates")) << "no nodeSelector: it would hold the pods";

  // With enough nodes: Ready, still without the validated-node selector.
  cluster_.AddNode("node-new", "p5.48xlarge", "Pass");
  const Json enough = Entry(QueuedWorkload());
  EXPECT_EQ(enough["state"], "Ready");
  EXPECT_TRUE(StartsWith(enough["message"], "audit mode: 4 validated p5.48xlarge nodes")) << enough;
  EXPECT_FALSE(enough.contains("podSetUpdates"));
}

TEST_F(AuditKueue, ThePolicysModeCountsAndAnEnforceLabelOverridesIt) {
  cluster_.policy().mode = core::Mode::Audit;
  EXPECT_EQ(Entry(QueuedWorkload())["state"], "Ready");
  cluster_.LabelNamespace("team-a", kModeLabel, "enforce");
  const auto result =
      controllers::ReconcileWorkloadChecks(QueuedWorkload(), objects_, cluster_, kNow + 1min);
  ASSERT_EQ(result.actions.size(), 1u);
  EXPECT_EQ(
      std::get<ApplyObject>(result.actions[0]).object["status"]["admissionChecks"][0]["state"],
      "Pending");
}

TEST_F(AuditKueue, UnreadablePodSetsAreNotHeldEither) {
  cluster_.LabelNamespace("team-a", kModeLabel, "audit");
  Json workload = QueuedWorkload();
  workload["spec"]["podSets"] = "nope";
  const Json entry = Entry(workload);
  EXPECT_EQ(entry["state"], "Ready");
  EXPECT_TRUE(
      StartsWith(entry["message"], "audit mode: ncclguard cannot read the Workload's pod sets"))
      << entry;
}

}  // namespace
}  // namespace ncclguard::test::audit_mode_test
