#include <gtest/gtest.h>

#include <variant>

#include "controllers/training_job_reconciler.h"
#include "tests/unit/controllers/fake_cluster.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

using controllers::Action;
using controllers::CreateObject;
using controllers::MergePatch;
using controllers::ReconcileTrainingJob;
using controllers::RecordEvent;
using controllers::Timestamp;
using core::WorkloadKind;

const Timestamp kNow =
    std::chrono::sys_days(std::chrono::year(2026) / 12 / 2) + std::chrono::hours(14);

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

class Reconciler : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_.AddNamespace("team-a", true);
    cluster_.AddNamespace("plain", false);
  }
  controllers::ReconcileResult Reconcile(const JobKey& key, Timestamp now = kNow) {
    return ReconcileTrainingJob(key, cluster_, now);
  }
  // Reconciles and applies until nothing is left to do; returns the number of rounds.
  int Converge(const JobKey& key) {
    for (int round = 1; round <= 5; ++round) {
      const auto result = Reconcile(key);
      if (result.actions.empty()) return round;
      EXPECT_EQ(cluster_.Apply(result.actions), 0);
    }
    return -1;
  }
  // llama (4 nodes) held with 3 of 4 p5 nodes passing; then a fourth joins (Warn counts).
  void HoldUntilAFourthNodeJoins() {
    cluster_.AddJob(P5PyTorchJob("team-a", "llama", 3, true));
    AddP5Nodes(3, 1);
    ASSERT_GT(Converge(key_), 0);
    cluster_.AddNode("node-new", "p5.48xlarge", "Warn");
  }
  void AddP5Nodes(int pass, int fail = 0) {
    for (int i = 0; i < pass; ++i)
      cluster_.AddNode("node-" + std::to_string(i), "p5.48xlarge", "Pass");
    for (int i = 0; i < fail; ++i) {
      cluster_.AddNode("node-x" + std::to_string(i), "p5.48xlarge", "Fail", EfaFailure());
    }
  }

  FakeCluster cluster_;
  const JobKey key_{WorkloadKind::PyTorchJob, "team-a", "llama"};
};

TEST_F(Reconciler, CreatesTheHeadlessRendezvousServiceOwnedByTheJob) {
  cluster_.AddJob(P5PyTorchJob("team-a", "llama", 3, false));
  const auto result = Reconcile(key_);
  const auto creates = Only<CreateObject>(result.actions);
  ASSERT_EQ(creates.size(), 1u);
  const Json& svc = creates[0].object;
  EXPECT_EQ(svc["metadata"]["name"], "llama");
  EXPECT_EQ(svc["spec"]["clusterIP"], "None");
  EXPECT_EQ(svc["spec"]["publishNotReadyAddresses"], true);
  EXPECT_EQ(svc["spec"]["selector"]["training.kubeflow.org/job-name"], "llama");
  EXPECT_EQ(svc["spec"]["ports"][0]["port"], 29500);
  EXPECT_EQ(svc["metadata"]["ownerReferences"][0]["uid"], "uid-llama");
  EXPECT_EQ(svc["metadata"]["ownerReferences"][0]["controller"], true);
  EXPECT_EQ(svc["metadata"]["annotations"]["ncclguard.io/master-addr"],
            "llama-master-0.llama.team-a.svc.cluster.local");
  // Once the Service exists, nothing is left to do.
  EXPECT_EQ(Converge(key_), 2);
  EXPECT_EQ(cluster_.ServiceCount(), 1u);
}

TEST_F(Reconciler, ServicePortFollowsThePolicyAndDriftIsRepaired) {
  cluster_.AddJob(P5PyTorchJob("team-a", "llama", 1, false));
  ASSERT_GT(Converge(key_), 0);
  cluster_.policy().rendezvous_port = 23456;
  const auto result = Reconcile(key_);
  const auto patches = Only<MergePatch>(result.actions);
  ASSERT_EQ(patches.size(), 1u);
  EXPECT_EQ(patches[0].target.kind, "Service");
  EXPECT_EQ(patches[0].patch["spec"]["ports"][0]["port"], 23456);
  ASSERT_EQ(cluster_.Apply(result.actions), 0);
  EXPECT_TRUE(Reconcile(key_).actions.empty());
  EXPECT_EQ(cluster_.ServiceCount(), 1u);
}

TEST_F(Reconciler, NeverTouchesAServiceTheJobDoesNotOwnAndReportsItOnce) {
  cluster_.AddJob(P5PyTorchJob("team-a", "llama", 1, false));
  cluster_.AddService({{"apiVersion", "v1"},
                       {"kind", "Service"},
                       {"metadata", {{"name", "llama"}, {"namespace", "team-a"}}},
                       {"spec", {{"selector", {{"app", "other"}}}}}});
  const auto result = Reconcile(key_);
  EXPECT_TRUE(Only<CreateObject>(result.actions).empty());
  EXPECT_TRUE(Only<MergePatch>(result.actions).empty());
  const auto events = Only<RecordEvent>(result.actions);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].reason, "RendezvousServiceConflict");
  EXPECT_NE(events[0].note.find("#dns-rendezvous"), std::string::npos);
  ASSERT_EQ(cluster_.Apply(result.actions), 0);
  EXPECT_TRUE(Reconcile(key_).actions.empty());
  EXPECT_EQ(cluster_.Service("team-a", "llama").value()["spec"]["selector"]["app"], "other");
}

TEST_F(Reconciler, AcceptsAServiceTheJobsOwnOperatorMade) {
  Json jobset{{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
              {"kind", "JobSet"},
              {"metadata", {{"name", "js"}, {"namespace", "team-a"}, {"uid", "uid-js"}}},
              {"spec", {{"replicatedJobs", Json::array()}}}};
  cluster_.AddJob(jobset);
  cluster_.AddService(
      {{"apiVersion", "v1"},
       {"kind", "Service"},
       {"metadata",
        {{"name", "js"},
         {"namespace", "team-a"},
         {"ownerReferences", {{{"uid", "uid-js"}, {"controller", true}, {"kind", "JobSet"}}}}}},
       {"spec",
        {{"clusterIP", "None"}, {"selector", {{"jobset.sigs.k8s.io/jobset-name", "js"}}}}}});
  EXPECT_TRUE(Reconcile({WorkloadKind::JobSet, "team-a", "js"}).actions.empty());
}

TEST_F(Reconciler, LeavesTheMpiJobServiceToTheMpiOperator) {
  Json mpi{{"apiVersion", "kubeflow.org/v2beta1"},
           {"kind", "MPIJob"},
           {"metadata", {{"name", "bert"}, {"namespace", "team-a"}}},
           {"spec", {{"mpiReplicaSpecs", Json::object()}}}};
  cluster_.AddJob(mpi);
  EXPECT_TRUE(Reconcile({WorkloadKind::MpiJob, "team-a", "bert"}).actions.empty());
  EXPECT_EQ(cluster_.ServiceCount(), 0u);
}

TEST_F(Reconciler, HoldsAGatedJobUntilEnoughNodesAreValidated) {
  cluster_.AddJob(P5PyTorchJob("team-a", "llama", 3, true));  // 4 pods x 8 GPUs = 4 nodes
  AddP5Nodes(3, 1);
  const auto result = Reconcile(key_);
  ASSERT_TRUE(result.requeue_after);
  EXPECT_EQ(*result.requeue_after, std::chrono::seconds(10));
  // No release.
  for (const MergePatch& p : Only<MergePatch>(result.actions)) EXPECT_TRUE(p.status_subresource);
  ASSERT_EQ(cluster_.Apply(result.actions), 0);

  const Json& job = cluster_.JobObject(key_);
  const Json preflight = Condition(job, "NcclPreflight");
  ASSERT_TRUE(preflight.is_object());
  EXPECT_EQ(preflight["status"], "False");
  EXPECT_EQ(preflight["reason"], "InsufficientValidatedNodes");
  EXPECT_EQ(preflight["message"],
            "3/4 p5.48xlarge nodes validated; node node-x0 failed efa-device-count: 30 of 32 EFA "
            "devices \u2014 see "
            "https://github.com/ncclguard/ncclguard/blob/main/docs/guide.md#efa-config");
  EXPECT_EQ(preflight["lastTransitionTime"], "2026-12-02T14:00:00Z");
  const Json diagnosis = Condition(job, "NcclDiagnosis");
  EXPECT_EQ(diagnosis["reason"], "InsufficientValidatedNodes");
  EXPECT_EQ(diagnosis["message"].get<std::string>().rfind("insufficient-validated-nodes: ", 0), 0u)
      << diagnosis;
  EXPECT_EQ(job["spec"]["runPolicy"]["suspend"], true);
  EXPECT_EQ(job["metadata"]["annotations"]["ncclguard.io/gate"], "pending");

  bool warned = false;
  for (const Json& e : cluster_.events()) {
    if (e["reason"] == "InsufficientValidatedNodes") {
      warned = true;
      EXPECT_EQ(e["type"], "Warning");
      EXPECT_EQ(e["metadata"]["annotations"]["ncclguard.io/diagnosis"],
                "insufficient-validated-nodes");
      EXPECT_EQ(e["note"].get<std::string>().rfind("insufficient-validated-nodes: ", 0), 0u);
      EXPECT_NE(e["note"].get<std::string>().find("3/4 p5.48xlarge"), std::string::npos);
      EXPECT_NE(e["note"].get<std::string>().find("#efa-config"), std::string::npos);
    }
  }
  EXPECT_TRUE(warned);

  // Same state: nothing new to say, and the requeue backs off with the time held.
  const auto again = Reconcile(key_, kNow + std::chrono::seconds(40));
  EXPECT_TRUE(again.actions.empty());
  EXPECT_EQ(*again.requeue_after, std::chrono::seconds(40));
  EXPECT_EQ(*Reconcile(key_, kNow + std::chrono::hours(2)).requeue_after,
            std::chrono::seconds(300));
}

TEST_F(Reconciler, ReleasesOnceTheFourthNodePasses) {
  ASSERT_NO_FATAL_FAILURE(HoldUntilAFourthNodeJoins());

  const auto result = Reconcile(key_, kNow + std::chrono::minutes(1));
  EXPECT_FALSE(result.requeue_after);
  ASSERT_EQ(result.actions.size(), 1u)
      << "a held job's release is its reconcile's one write: the job waits for no other";
  const auto patches = Only<MergePatch>(result.actions);
  ASSERT_EQ(patches.size(), 1u);
  EXPECT_FALSE(patches[0].status_subresource);
  EXPECT_EQ(patches[0].patch["spec"]["runPolicy"]["suspend"], false);
  EXPECT_EQ(patches[0].patch["metadata"]["annotations"]["ncclguard.io/gate"], "admitted");
  ASSERT_EQ(cluster_.Apply(result.actions), 0);
  EXPECT_EQ(cluster_.JobObject(key_)["spec"]["runPolicy"]["suspend"], false);

  // The release's own watch event queues the job again: its condition and the Admitted Event.
  const auto told = Reconcile(key_, kNow + std::chrono::minutes(1) + std::chrono::seconds(1));
  const auto condition = Only<MergePatch>(told.actions);
  ASSERT_EQ(condition.size(), 1u);
  EXPECT_TRUE(condition[0].status_subresource);
  EXPECT_TRUE(std::holds_alternative<RecordEvent>(told.actions.back())) << "Events last";
  ASSERT_EQ(cluster_.Apply(told.actions), 0);
  const Json& job = cluster_.JobObject(key_);
  EXPECT_EQ(Condition(job, "NcclPreflight")["status"], "True");
  EXPECT_EQ(Condition(job, "NcclPreflight")["reason"], "ValidatedNodesAvailable");
  EXPECT_EQ(Condition(job, "NcclPreflight")["lastTransitionTime"], "2026-12-02T14:01:01Z");
  EXPECT_EQ(Condition(job, "NcclDiagnosis")["status"], "False");
  const auto admitted = Only<RecordEvent>(told.actions);
  ASSERT_EQ(admitted.size(), 1u) << "a job that was held is told of its release";
  EXPECT_EQ(admitted[0].reason, "Admitted");
  EXPECT_TRUE(Reconcile(key_, kNow + std::chrono::minutes(2)).actions.empty());
}

// A reconcile over a cache that has not seen the release yet (the job pending still) sends a
// release that names the version it read: the API server answers Conflict instead of releasing
// the job a second time (a release counted twice) or telling of it twice.
TEST_F(Reconciler, AReconcileOverACacheBehindItsOwnReleaseDoesNotReleaseAgain) {
  ASSERT_NO_FATAL_FAILURE(HoldUntilAFourthNodeJoins());
  const auto first = Reconcile(key_, kNow + std::chrono::minutes(1));
  const FakeCluster behind = cluster_;  // what the cache holds for a moment
  ASSERT_EQ(cluster_.Apply(first.actions), 0);
  const std::string released = cluster_.JobObject(key_)["metadata"]["resourceVersion"];

  const auto stale =
      controllers::ReconcileTrainingJob(key_, behind, kNow + std::chrono::minutes(1));
  ASSERT_EQ(Only<MergePatch>(stale.actions).size(), 1u) << "the release again";
  EXPECT_EQ(cluster_.Apply(stale.actions), 1) << "Conflict: nothing after it is sent";
  EXPECT_EQ(cluster_.JobObject(key_)["metadata"]["resourceVersion"], released);
  ASSERT_GT(Converge(key_), 0);
  EXPECT_TRUE(Reconcile(key_, kNow + std::chrono::minutes(2)).actions.empty());
  int admitted = 0;
  for (const Json& e : cluster_.events()) admitted += e["reason"] == "Admitted" ? 1 : 0;
  EXPECT_EQ(admitted, 1);
}

// The API server applied the release but its answer was lost (the server was slow past the
// client's timeout, or went away), or the condition patch after it met a Conflict (the training
// operator starting the job): the next reconcile writes the condition and tells of the release,
// once.
TEST_F(Reconciler, AHeldJobWhoseReleaseAnswerWasLostIsStillToldOfItsRelease) {
  ASSERT_NO_FATAL_FAILURE(HoldUntilAFourthNodeJoins());
  const auto first = Reconcile(key_, kNow + std::chrono::minutes(1));
  ASSERT_FALSE(first.actions.empty());
  ASSERT_EQ(cluster_.Apply({first.actions.front()}), 0);  // the release landed, no more
  EXPECT_EQ(cluster_.JobObject(key_)["spec"]["runPolicy"]["suspend"], false);
  EXPECT_EQ(Condition(cluster_.JobObject(key_), "NcclPreflight")["status"], "False");

  const auto retry = Reconcile(key_, kNow + std::chrono::minutes(2));
  const auto patches = Only<MergePatch>(retry.actions);
  ASSERT_EQ(patches.size(), 1u) << "the condition alone: the job is released";
  EXPECT_TRUE(patches[0].status_subresource);
  const auto events = Only<RecordEvent>(retry.actions);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].reason, "Admitted");
  ASSERT_EQ(cluster_.Apply(retry.actions), 0);
  // The condition reads as the release would have written it.
  EXPECT_EQ(Condition(cluster_.JobObject(key_), "NcclPreflight")["status"], "True");
  EXPECT_EQ(Condition(cluster_.JobObject(key_), "NcclPreflight")["reason"],
            "ValidatedNodesAvailable");
  EXPECT_TRUE(Reconcile(key_, kNow + std::chrono::minutes(3)).actions.empty());
  int admitted = 0;
  for (const Json& e : cluster_.events()) admitted += e["reason"] == "Admitted" ? 1 : 0;
  EXPECT_EQ(admitted, 1);
}

// A job held by an older ncclguard carries the gate's diagnosis under its kebab-case id as the
// reason; its release still resolves it, and the condition is rewritten in UpperCamelCase.
TEST_F(Reconciler, ReleaseResolvesADiagnosisAnOlderVersionWroteInKebabCase) {
  Json job = P5PyTorchJob("team-a", "llama", 3, true);
  job["status"]["conditions"] = Json::array({{{"type", "NcclDiagnosis"},
                                              {"status", "True"},
                                              {"reason", "insufficient-validated-nodes"},
                                              {"message", "insufficient-validated-nodes: held"},
                                              {"lastTransitionTime", "2026-12-02T13:00:00Z"}}});
  cluster_.AddJob(job);
  AddP5Nodes(4, 0);
  ASSERT_GT(Converge(key_), 0);
  const Json diagnosis = Condition(cluster_.JobObject(key_), "NcclDiagnosis");
  EXPECT_EQ(diagnosis["status"], "False");
  EXPECT_EQ(diagnosis["reason"], "Resolved");
}

TEST_F(Reconciler, AJobReleasedAtItsFirstLookGetsTheConditionButNoEvent) {
  cluster_.AddJob(P5PyTorchJob("team-a", "llama", 3, true));
  AddP5Nodes(4, 0);
  const auto result = Reconcile(key_);
  EXPECT_TRUE(Only<RecordEvent>(result.actions).empty());
  ASSERT_EQ(cluster_.Apply(result.actions), 0);
  const Json& job = cluster_.JobObject(key_);
  EXPECT_EQ(job["spec"]["runPolicy"]["suspend"], false);
  EXPECT_EQ(Condition(job, "NcclPreflight")["status"], "True");
  EXPECT_EQ(Condition(job, "NcclPreflight")["reason"], "ValidatedNodesAvailable");
}

// A held job says which instance type it waits for: only a change of those nodes wakes it.
TEST_F(Reconciler, AHeldJobWaitsForItsInstanceTypeAndAReleasedOneForNothing) {
  ASSERT_NO_FATAL_FAILURE(HoldUntilAFourthNodeJoins());
  EXPECT_TRUE(Reconcile(key_).waiting_for.empty()) << "four validated nodes now: released";
  cluster_.AddJob(P5PyTorchJob("team-a", "big", 7, true));  // 8 nodes
  const auto waiting = Reconcile({WorkloadKind::PyTorchJob, "team-a", "big"}).waiting_for;
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting[0].instance_type, "p5.48xlarge");
  EXPECT_EQ(waiting[0].nodes, 8);
}

// The webhook admitted the job at creation (the gate's fast path: ncclguard.io/gate=admitted,
// never suspended): the controller writes the NcclPreflight condition that says so, once.
TEST_F(Reconciler, AJobAdmittedAtCreationGetsItsConditionAndNoRelease) {
  Json job = P5PyTorchJob("team-a", "llama", 3, false);
  job["metadata"]["annotations"]["ncclguard.io/gate"] = "admitted";
  cluster_.AddJob(job);
  AddP5Nodes(4, 0);
  const auto result = Reconcile(key_);
  EXPECT_TRUE(Only<RecordEvent>(result.actions).empty());
  for (const MergePatch& p : Only<MergePatch>(result.actions)) EXPECT_TRUE(p.status_subresource);
  ASSERT_EQ(cluster_.Apply(result.actions), 0);
  const Json preflight = Condition(cluster_.JobObject(key_), "NcclPreflight");
  EXPECT_EQ(preflight["status"], "True");
  EXPECT_EQ(preflight["reason"], "ValidatedNodesAvailable");
  EXPECT_EQ(preflight["message"],
            "admitted at creation, not held: 4 validated p5.48xlarge nodes for 4 needed");
  EXPECT_TRUE(Reconcile(key_).actions.empty());
  // Nodes lost before the controller first looked: still True (it runs), saying so.
  Json late = P5PyTorchJob("team-a", "late", 7, false);
  late["metadata"]["annotations"]["ncclguard.io/gate"] = "admitted";
  cluster_.AddJob(late);
  const JobKey late_key{WorkloadKind::PyTorchJob, "team-a", "late"};
  ASSERT_EQ(cluster_.Apply(Reconcile(late_key).actions), 0);
  const Json late_preflight = Condition(cluster_.JobObject(late_key), "NcclPreflight");
  EXPECT_EQ(late_preflight["status"], "True");
  EXPECT_EQ(late_preflight["reason"], "AdmittedAtCreation");
  EXPECT_EQ(cluster_.JobObject(late_key)["spec"]["runPolicy"].value("suspend", false), false);
}

TEST_F(Reconciler, CordonedAndUnprobedNodesDoNotCountUnlessThePolicySaysSo) {
  cluster_.AddJob(P5PyTorchJob("team-a", "llama", 1, true));  // 2 nodes
  cluster_.AddNode("a", "p5.48xlarge", "Pass", Json::array(), /*cordoned=*/true);
  cluster_.AddNode("b", "p5.48xlarge", "");
  cluster_.AddNode("c", "p5.48xlarge", "");
  cluster_.AddNode("d", "p4d.24xlarge", "Pass");
  auto held = Reconcile(key_);
  ASSERT_EQ(cluster_.Apply(held.actions), 0);
  const std::string message = Condition(cluster_.JobObject(key_), "NcclPreflight")["message"];
  EXPECT_EQ(message.rfind("0/2 p5.48xlarge nodes validated; 2 not yet validated, 1 cordoned", 0),
            0u)
      << message;

  cluster_.policy().gate.count_unvalidated_nodes = true;
  const auto released = Reconcile(key_);
  const auto patches = Only<MergePatch>(released.actions);
  ASSERT_EQ(patches.size(), 1u);
  EXPECT_EQ(patches[0].patch["metadata"]["annotations"]["ncclguard.io/gate"], "admitted");
}

TEST_F(Reconciler, AJobWithoutTheGateAnnotationIsNeverSuspendedOrReleased) {
  Json job = P5PyTorchJob("team-a", "llama", 3, false);
  job["spec"]["runPolicy"]["suspend"] = true;  // the user's own suspension
  cluster_.AddJob(job);
  const auto result = Reconcile(key_);
  for (const MergePatch& p : Only<MergePatch>(result.actions)) {
    EXPECT_EQ(p.target.kind, "Service") << p.patch.dump();
  }
  EXPECT_FALSE(result.requeue_after);
}

TEST_F(Reconciler, GateDisabledInThePolicyReleasesPendingJobs) {
  cluster_.AddJob(P5PyTorchJob("team-a", "llama", 3, true));
  cluster_.policy().gate.enabled = false;
  ASSERT_GT(Converge(key_), 0);
  const Json& job = cluster_.JobObject(key_);
  EXPECT_EQ(job["spec"]["runPolicy"]["suspend"], false);
  EXPECT_EQ(Condition(job, "NcclPreflight")["reason"], "GateDisabled");
}

TEST_F(Reconciler, IgnoresJobsOutsideOptedInNamespacesButNeverLeavesThemStuck) {
  cluster_.AddJob(P5PyTorchJob("plain", "free", 1, false));
  EXPECT_TRUE(Reconcile({WorkloadKind::PyTorchJob, "plain", "free"}).actions.empty());

  cluster_.AddJob(P5PyTorchJob("plain", "stuck", 1, true));
  const JobKey stuck{WorkloadKind::PyTorchJob, "plain", "stuck"};
  const auto result = Reconcile(stuck);
  EXPECT_TRUE(Only<CreateObject>(result.actions).empty());
  ASSERT_EQ(cluster_.Apply(result.actions), 0);
  EXPECT_EQ(cluster_.JobObject(stuck)["spec"]["runPolicy"]["suspend"], false);
}

TEST_F(Reconciler, BatchJobsNeedTheManagedLabel) {
  Json job{{"apiVersion", "batch/v1"},
           {"kind", "Job"},
           {"metadata", {{"name", "train"}, {"namespace", "team-a"}}},
           {"spec",
            {{"completionMode", "Indexed"},
             {"completions", 2},
             {"parallelism", 2},
             {"template", {{"spec", {{"containers", {{{"name", "c"}, {"image", "x:1"}}}}}}}}}}};
  cluster_.AddJob(job);
  const JobKey key{WorkloadKind::BatchJob, "team-a", "train"};
  EXPECT_TRUE(Reconcile(key).actions.empty());

  job["metadata"]["labels"]["ncclguard.io/managed"] = "true";
  cluster_.AddJob(job);
  const auto creates = Only<CreateObject>(Reconcile(key).actions);
  ASSERT_EQ(creates.size(), 1u);
  EXPECT_EQ(creates[0].object["spec"]["selector"]["batch.kubernetes.io/job-name"], "train");
  EXPECT_EQ(creates[0].object["metadata"]["annotations"]["ncclguard.io/master-addr"],
            "train-0.train.team-a.svc.cluster.local");
}

TEST_F(Reconciler, ASpecTheRulesCannotReadGetsAConditionNotACrash) {
  Json job = P5PyTorchJob("team-a", "llama", 1, true);
  job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "two";
  cluster_.AddJob(job);
  controllers::ReconcileResult result;
  ASSERT_NO_THROW(result = Reconcile(key_));
  ASSERT_EQ(cluster_.Apply(result.actions), 0);
  const Json& stored = cluster_.JobObject(key_);
  const Json preflight = Condition(stored, "NcclPreflight");
  EXPECT_EQ(preflight["status"], "Unknown");
  EXPECT_EQ(preflight["reason"], "SpecUnreadable");
  EXPECT_NE(
      preflight["message"].get<std::string>().find("/spec/pytorchReplicaSpecs/Worker/replicas"),
      std::string::npos)
      << preflight["message"];
  bool reported = false;
  for (const Json& e : cluster_.events()) reported |= e["reason"] == "SpecUnreadable";
  EXPECT_TRUE(reported);
  // Fail safe: an unreadable spec is not held forever.
  EXPECT_EQ(stored["spec"]["runPolicy"]["suspend"], false);
  EXPECT_TRUE(Reconcile(key_).actions.empty());
}

TEST_F(Reconciler, AMalformedJobSetSubdomainIsReportedNotThrown) {
  Json js{{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
          {"kind", "JobSet"},
          {"metadata", {{"name", "js"}, {"namespace", "team-a"}}},
          {"spec", {{"network", {{"subdomain", 5}}}, {"replicatedJobs", {{{"name", 7}}}}}}};
  cluster_.AddJob(js);
  const JobKey key{WorkloadKind::JobSet, "team-a", "js"};
  controllers::ReconcileResult result;
  ASSERT_NO_THROW(result = Reconcile(key));
  // The JobSet controller makes its Service: ncclguard creates nothing.
  EXPECT_TRUE(Only<CreateObject>(result.actions).empty());
  ASSERT_EQ(cluster_.Apply(result.actions), 0);
  EXPECT_EQ(Condition(cluster_.JobObject(key), "NcclPreflight")["reason"], "SpecUnreadable");
}

TEST_F(Reconciler, GarbageInTheCacheNeverThrows) {
  Json job = P5PyTorchJob("team-a", "llama", 1, false);
  job["status"] = {{"conditions", {"not-a-condition", {{"type", 7}}}}};
  cluster_.AddJob(job);
  cluster_.AddPod(
      KubeflowPod("team-a", "llama", "llama-worker-0",
                  {{"containerStatuses",
                    {{{"name", 3}, {"state", {{"terminated", {{"exitCode", "137"}}}}}}, "junk"}}}));
  EXPECT_NO_THROW(Converge(key_));
}

TEST_F(Reconciler, DiagnosesFailedPodsOnceWithConditionAndEvents) {
  cluster_.AddJob(P5PyTorchJob("team-a", "llama", 1, false));
  cluster_.AddPod(
      KubeflowPod("team-a", "llama", "llama-master-0", Terminated("pytorch", 137, "OOMKilled")));
  cluster_.AddPod(KubeflowPod(
      "team-a", "llama", "llama-worker-0",
      Terminated("pytorch", 1, "Error",
                 "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")));
  const auto result = Reconcile(key_);
  const auto events = Only<RecordEvent>(result.actions);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].reason, "GPUOOM");
  EXPECT_EQ(events[0].annotations.at("ncclguard.io/diagnosis"), "gpu-oom");
  EXPECT_EQ(events[1].reason, "ContainerOOMKilled");
  EXPECT_EQ(events[1].annotations.at("ncclguard.io/diagnosis"), "container-oom-killed");
  EXPECT_EQ(events[1].note.rfind("container-oom-killed: ", 0), 0u) << events[1].note;
  EXPECT_NE(events[1].note.find("pod llama-master-0 container pytorch was OOMKilled"),
            std::string::npos);
  EXPECT_NE(events[1].note.find("#container-oom"), std::string::npos);
  ASSERT_EQ(cluster_.Apply(result.actions), 0);

  const Json diagnosis = Condition(cluster_.JobObject(key_), "NcclDiagnosis");
  EXPECT_EQ(diagnosis["status"], "True");
  EXPECT_EQ(diagnosis["reason"], "GPUOOM");
  EXPECT_EQ(diagnosis["message"],
            "gpu-oom: pod llama-worker-0 container pytorch ran out of GPU memory (CUDA out of "
            "memory) (also: container-oom-killed) \u2014 see "
            "https://github.com/ncclguard/ncclguard/blob/main/docs/guide.md#gpu-oom");
  EXPECT_TRUE(Reconcile(key_).actions.empty());
}

TEST_F(Reconciler, DiagnosisOutlivesDeletedPods) {
  cluster_.AddJob(P5PyTorchJob("team-a", "llama", 1, false));
  cluster_.AddPod(
      KubeflowPod("team-a", "llama", "llama-master-0", Terminated("pytorch", 139, "Error")));
  ASSERT_GT(Converge(key_), 0);
  FakeCluster after;  // the same objects, the pods gone
  after.AddNamespace("team-a", true);
  after.AddJob(cluster_.JobObject(key_));
  after.AddService(cluster_.Service("team-a", "llama").value());
  for (const Json& e : cluster_.events()) after.AddEvent(e);
  EXPECT_TRUE(ReconcileTrainingJob(key_, after, kNow).actions.empty());
}

TEST_F(Reconciler, VersionDriftAcrossTheJobsNodes) {
  cluster_.AddJob(P5PyTorchJob("team-a", "llama", 1, false));
  auto versions = [](const std::string& nccl) {
    return Json::array({{{"id", "nccl-version"}, {"status", "Pass"}, {"observed", nccl}},
                        {{"id", "driver-version"}, {"status", "Pass"}, {"observed", "550.90.07"}}});
  };
  cluster_.AddNode("n1", "p5.48xlarge", "Pass", versions("2.21.5"));
  cluster_.AddNode("n2", "p5.48xlarge", "Pass", versions("2.18.3"));
  cluster_.AddPod(KubeflowPod("team-a", "llama", "llama-master-0", Json::object(), "n1"));
  cluster_.AddPod(KubeflowPod("team-a", "llama", "llama-worker-0", Json::object(), "n2"));
  const auto events = Only<RecordEvent>(Reconcile(key_).actions);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].reason, "VersionDrift");
  EXPECT_EQ(events[0].note.rfind(
                "version-drift: the job's nodes run different NCCL versions: 2.18.3 on n2; "
                "2.21.5 on n1",
                0),
            0u)
      << events[0].note;
}

TEST_F(Reconciler, SchedulingFailuresFromPodConditionsAndEvents) {
  cluster_.AddJob(P5PyTorchJob("team-a", "llama", 1, false));
  cluster_.AddPod(KubeflowPod(
      "team-a", "llama", "llama-master-0",
      {{"conditions",
        {{{"type", "PodScheduled"},
          {"status", "False"},
          {"reason", "Unschedulable"},
          {"message", "0/4 nodes are available: 4 Insufficient vpc.amazonaws.com/efa."}}}}}));
  cluster_.AddPod(KubeflowPod("team-a", "llama", "llama-worker-0", Json::object()));
  Json event{{"apiVersion", "v1"},
             {"kind", "Event"},
             {"metadata", {{"name", "e1"}, {"namespace", "team-a"}}},
             {"involvedObject", {{"kind", "Pod"}, {"name", "llama-worker-0"}}},
             {"reason", "FailedScheduling"}};
  event["message"] =
      "0/4 nodes are available: 4 node(s) had untolerated taint {nvidia.com/gpu: true}.";
  cluster_.AddEvent(event);
  const auto events = Only<RecordEvent>(Reconcile(key_).actions);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].reason, "EFAUnschedulable");
  EXPECT_EQ(events[1].reason, "UntoleratedTaint");
  EXPECT_NE(events[1].note.find("pod llama-worker-0: 0/4 nodes"), std::string::npos);
}

TEST_F(Reconciler, ADeletedOrDeletingJobNeedsNothing) {
  EXPECT_TRUE(Reconcile(key_).actions.empty());
  Json job = P5PyTorchJob("team-a", "llama", 1, true);
  job["metadata"]["deletionTimestamp"] = "2026-12-02T13:00:00Z";
  cluster_.AddJob(job);
  EXPECT_TRUE(Reconcile(key_).actions.empty());
}

TEST_F(Reconciler, AStatusPatchCarriesTheResourceVersionItWasComputedFrom) {
  cluster_.AddJob(P5PyTorchJob("team-a", "llama", 3, true));
  const auto result = Reconcile(key_);
  // Someone else writes the job between our read and our write: the patch conflicts.
  cluster_.AddJob(cluster_.JobObject(key_));
  EXPECT_EQ(cluster_.Apply(result.actions), 1);
  EXPECT_GT(Converge(key_), 0);
  EXPECT_EQ(Condition(cluster_.JobObject(key_), "NcclPreflight")["status"], "False");
}

TEST_F(Reconciler, JobSetConditionsUseUpperCamelCaseReasons) {
  Json js{{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
          {"kind", "JobSet"},
          {"metadata", {{"name", "js"}, {"namespace", "team-a"}}},
          {"spec", {{"replicatedJobs", Json::array()}}}};
  cluster_.AddJob(js);
  const JobKey key{WorkloadKind::JobSet, "team-a", "js"};
  cluster_.AddPod({{"apiVersion", "v1"},
                   {"kind", "Pod"},
                   {"metadata",
                    {{"name", "js-w-0-0"},
                     {"namespace", "team-a"},
                     {"labels", {{"jobset.sigs.k8s.io/jobset-name", "js"}}}}},
                   {"status", Terminated("c", 137, "OOMKilled")}});
  ASSERT_GT(Converge(key), 0);
  const Json diagnosis = Condition(cluster_.JobObject(key), "NcclDiagnosis");
  EXPECT_EQ(diagnosis["reason"], "ContainerOOMKilled");
  EXPECT_FALSE(diagnosis.contains("lastUpdateTime"));
}

TEST(JobKeysForPod, MapsEachKindsPodLabels) {
  Json pod{{"metadata",
            {{"namespace", "ns"},
             {"labels", {{"training.kubeflow.org/job-name", "a"}}},
             {"ownerReferences", {{{"kind", "PyTorchJob"}, {"name", "a"}}}}}}};
  auto keys = controllers::JobKeysForPod(pod);
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys[0].ToString(), "PyTorchJob/ns/a");
  pod["metadata"]["labels"] = {{"jobset.sigs.k8s.io/jobset-name", "b"},
                               {"batch.kubernetes.io/job-name", "b-w-0"}};
  // A JobSet's pods and a TrainJob's carry the same label and are owned by Jobs: both kinds.
  keys = controllers::JobKeysForPod(pod);
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[0].ToString(), "JobSet/ns/b");
  EXPECT_EQ(keys[1].ToString(), "Job/ns/b-w-0");
  EXPECT_EQ(keys[2].ToString(), "TrainJob/ns/b");
}

}  // namespace
}  // namespace ncclguard::test

namespace ncclguard::test {
namespace {

// A TrainJob whose runtime puts its pods on p5.48xlarge with 8 GPUs each: the gate reads its
// demand in the runtime the controller's cache holds, holds it while one of its two nodes fails,
// and releases it by its spec.suspend once two pass.
TEST(TrainJobGate, TheDemandIsTheRuntimesPodsAndTheReleaseIsSpecSuspend) {
  FakeCluster cluster;
  cluster.AddNamespace("team-a", true);
  cluster.AddRuntime(Yaml(R"(
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: torch-p5}
spec:
  template:
    spec:
      replicatedJobs:
        - name: node
          template:
            spec:
              template:
                spec:
                  nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
                  containers: [{name: node, image: torch:1, resources: {limits: {nvidia.com/gpu: 8}}}]
)"));
  cluster.AddJob(Yaml(R"(
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: llama, namespace: team-a, annotations: {ncclguard.io/gate: pending}}
spec:
  suspend: true
  runtimeRef: {name: torch-p5}
  trainer: {numNodes: 2, image: train:1}
)"));
  cluster.AddNode("node-1", "p5.48xlarge", "Pass");
  cluster.AddNode("node-2", "p5.48xlarge", "Fail", EfaFailure());
  const JobKey key{WorkloadKind::TrainJob, "team-a", "llama"};
  auto held = controllers::ReconcileTrainingJob(key, cluster, kNow);
  ASSERT_EQ(cluster.Apply(held.actions), 0);
  EXPECT_TRUE(Only<CreateObject>(held.actions).empty())
      << "the JobSet controller makes the Service";
  const Json condition = Condition(cluster.JobObject(key), "NcclPreflight");
  EXPECT_EQ(condition["status"], "False");
  EXPECT_EQ(condition["message"].get<std::string>().rfind("1/2 p5.48xlarge nodes validated", 0), 0u)
      << condition;
  EXPECT_FALSE(condition.contains("lastUpdateTime")) << "metav1.Condition, as TrainJob's schema";
  EXPECT_EQ(cluster.JobObject(key)["spec"]["suspend"], true);

  cluster.AddNode("node-3", "p5.48xlarge", "Pass");  // a second good node joins
  const auto released = controllers::ReconcileTrainingJob(key, cluster, kNow);
  ASSERT_EQ(cluster.Apply(released.actions), 0);
  EXPECT_EQ(cluster.JobObject(key)["spec"]["suspend"], false);
}

}  // namespace
}  // namespace ncclguard::test
