// What the training-job controller counts of its reconciles, over the in-memory cluster that
// applies their actions: a release once (with how long the job was held), each diagnosis once per
// job when the condition first names it, a transport when set or changed.
#include "manager/training_job_metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "controllers/training_job_reconciler.h"
#include "metrics/registry.h"
#include "tests/unit/controllers/fake_cluster.h"

namespace ncclguard::test {
namespace {

using controllers::Timestamp;
using core::WorkloadKind;

const Timestamp kJobsNow =
    std::chrono::sys_days(std::chrono::year(2026) / 12 / 4) + std::chrono::hours(9);

class TrainingJobMetrics : public ::testing::Test {
 protected:
  void SetUp() override { cluster_.AddNamespace("team-a", true); }

  // One reconcile at `now`: what it counts, then its actions applied.
  manager::JobChanges ReconcileAndApply(Timestamp now = kJobsNow) {
    const controllers::ReconcileResult result =
        controllers::ReconcileTrainingJob(key_, cluster_, now);
    manager::JobChanges changes = manager::ChangesOf(key_, cluster_.Job(key_), result, now);
    EXPECT_EQ(cluster_.Apply(result.actions), 0);
    return changes;
  }

  FakeCluster cluster_;
  const JobKey key_{WorkloadKind::PyTorchJob, "team-a", "llama"};
};

TEST_F(TrainingJobMetrics, AReleaseIsCountedOnceWithTheTimeSinceTheJobWasCreated) {
  Json job = P5PyTorchJob("team-a", "llama", 1, true);
  job["metadata"]["creationTimestamp"] =
      controllers::FormatTime(kJobsNow - std::chrono::minutes(10));
  cluster_.AddJob(job);
  cluster_.AddNode("n0", "p5.48xlarge", "Pass");
  cluster_.AddNode("n1", "p5.48xlarge", "Fail", EfaFailure());
  manager::JobChanges held = ReconcileAndApply();
  EXPECT_FALSE(held.released);
  EXPECT_EQ(held.new_diagnoses, std::vector<std::string>{"insufficient-validated-nodes"});

  cluster_.AddNode("n2", "p5.48xlarge", "Pass");
  const manager::JobChanges released = ReconcileAndApply(kJobsNow + std::chrono::minutes(5));
  EXPECT_TRUE(released.released);
  ASSERT_TRUE(released.held_seconds);
  EXPECT_DOUBLE_EQ(*released.held_seconds, 15 * 60);
  EXPECT_TRUE(released.new_diagnoses.empty());
  EXPECT_FALSE(ReconcileAndApply(kJobsNow + std::chrono::minutes(6)).released);

  prometheus::Registry registry;
  manager::Metrics metrics(registry);
  manager::Count(held, WorkloadKind::PyTorchJob, metrics);
  manager::Count(released, WorkloadKind::PyTorchJob, metrics);
  const std::string text = metrics::Render(registry);
  EXPECT_NE(text.find("ncclguard_gate_releases_total{kind=\"PyTorchJob\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("ncclguard_gate_hold_duration_seconds_sum{kind=\"PyTorchJob\"} 900\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ncclguard_diagnoses_total{diagnosis=\"insufficient-validated-nodes\"} 1\n"),
            std::string::npos);
}

// A held job's release is its reconcile's one write; the reconcile after it writes the condition
// (as it would after a condition patch that met a Conflict): the release is counted once, when it
// lands, and that reconcile counts nothing more.
TEST_F(TrainingJobMetrics, AReleaseIsCountedOnceAndTheConditionAfterItCountsNothing) {
  cluster_.AddJob(P5PyTorchJob("team-a", "llama", 1, true));
  cluster_.AddNode("n0", "p5.48xlarge", "Pass");
  cluster_.AddNode("n1", "p5.48xlarge", "Fail", EfaFailure());
  ReconcileAndApply();
  cluster_.AddNode("n2", "p5.48xlarge", "Pass");
  const Timestamp now = kJobsNow + std::chrono::minutes(5);
  const controllers::ReconcileResult result =
      controllers::ReconcileTrainingJob(key_, cluster_, now);
  ASSERT_EQ(result.actions.size(), 1u) << "a held job's release alone";
  const manager::JobChanges none = manager::ChangesOf(key_, cluster_.Job(key_), result, now, 0);
  EXPECT_FALSE(none.released) << "nothing applied: nothing counted";
  const manager::JobChanges first = manager::ChangesOf(key_, cluster_.Job(key_), result, now, 1);
  EXPECT_TRUE(first.released) << "the release is the first action";
  ASSERT_EQ(cluster_.Apply({result.actions.front()}), 0);
  EXPECT_FALSE(ReconcileAndApply(now + std::chrono::minutes(1)).released);
}

TEST_F(TrainingJobMetrics, EachDiagnosisIsCountedOncePerJob) {
  cluster_.AddJob(P5PyTorchJob("team-a", "llama", 1, false));
  cluster_.AddPod(
      KubeflowPod("team-a", "llama", "llama-master-0", Terminated("pytorch", 137, "OOMKilled")));
  std::vector<std::string> first = ReconcileAndApply().new_diagnoses;
  std::sort(first.begin(), first.end());
  EXPECT_EQ(first, std::vector<std::string>{"container-oom-killed"});
  EXPECT_TRUE(ReconcileAndApply().new_diagnoses.empty());

  // A second failure joins: only it is new (the first stays named in the condition).
  cluster_.AddPod(
      KubeflowPod("team-a", "llama", "llama-worker-0", Terminated("pytorch", 139, "Error")));
  std::vector<std::string> second = ReconcileAndApply().new_diagnoses;
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(second.front(), "container-oom-killed");
  const std::vector<std::string> named = controllers::DiagnosesNamed(cluster_.JobObject(key_));
  EXPECT_EQ(named.size(), 2u);
  EXPECT_NE(std::find(named.begin(), named.end(), "container-oom-killed"), named.end());
  EXPECT_TRUE(ReconcileAndApply().new_diagnoses.empty());
}

TEST_F(TrainingJobMetrics, ATransportIsCountedWhenSetOrChangedNotWhenRepeated) {
  Json job = P5PyTorchJob("team-a", "llama", 1, false);
  const auto status_patch = [this](const std::string& transport) {
    controllers::ReconcileResult result;
    result.actions.push_back(controllers::MergePatch{
        core::ObjectRef{.api_version = "kubeflow.org/v1",
                        .kind = "PyTorchJob",
                        .namespace_ = key_.namespace_,
                        .name = key_.name,
                        .uid = "",
                        .resource = "pytorchjobs"},
        true,
        {{"status",
          {{"conditions", Json::array({{{"type", "NcclTransport"},
                                        {"status", transport == "EFA" ? "True" : "False"},
                                        {"reason", transport}}})}}}}});
    return result;
  };
  EXPECT_EQ(manager::ChangesOf(key_, job, status_patch("Socket"), kJobsNow).transport, "Socket");
  job["status"]["conditions"] =
      Json::array({{{"type", "NcclTransport"}, {"status", "False"}, {"reason", "Socket"}}});
  EXPECT_FALSE(manager::ChangesOf(key_, job, status_patch("Socket"), kJobsNow).transport);
  EXPECT_EQ(manager::ChangesOf(key_, job, status_patch("EFA"), kJobsNow).transport, "EFA");
  // Another job's patch, or a job not in the cache: nothing.
  const JobKey other{WorkloadKind::PyTorchJob, "team-a", "other"};
  EXPECT_FALSE(manager::ChangesOf(other, job, status_patch("EFA"), kJobsNow).transport);
  EXPECT_FALSE(manager::ChangesOf(key_, std::nullopt, status_patch("EFA"), kJobsNow).transport);
}

TEST(DiagnosesNamed, OnlyRegisteredIdsOfATrueConditionCount) {
  const auto job = [](const std::string& status, const std::string& message) {
    return Json{{"status",
                 {{"conditions", Json::array({{{"type", "NcclDiagnosis"},
                                               {"status", status},
                                               {"reason", "GPUOOM"},
                                               {"message", message}}})}}}};
  };
  const std::string message =
      "gpu-oom: pod p (quoted: x (also: no-such-id)) (also: container-oom-killed, segfault) "
      "\u2014 see https://example.invalid/guide.md#gpu-oom";
  EXPECT_EQ(controllers::DiagnosesNamed(job("True", message)),
            (std::vector<std::string>{"gpu-oom", "container-oom-killed", "segfault"}));
  EXPECT_TRUE(controllers::DiagnosesNamed(job("False", message)).empty());
  EXPECT_TRUE(controllers::DiagnosesNamed(job("True", "")).empty());
  EXPECT_TRUE(controllers::DiagnosesNamed(Json("junk")).empty());
}

// A reconcile that reads the version it has already released (its own patch not yet in the
// cache, another event waking the job) repeats the release: counted once.
TEST(CountedVersions, AVersionIsCountedOnceAndAnOldOneIsForgotten) {
  manager::CountedVersions counted;
  EXPECT_TRUE(counted.First("ml/llama@7"));
  EXPECT_FALSE(counted.First("ml/llama@7"));
  EXPECT_TRUE(counted.First("ml/llama@8"));
  for (int i = 0; i < 5000; ++i) counted.First("ml/job-" + std::to_string(i) + "@1");
  EXPECT_TRUE(counted.First("ml/llama@7")) << "bounded: the oldest versions are forgotten";
}

}  // namespace
}  // namespace ncclguard::test
