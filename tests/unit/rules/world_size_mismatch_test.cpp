#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kWorldSizeMismatchRule = "world-size-mismatch";

// The Worker container of PyTorchJob(3): Master 1 + Worker 3 replicas of 8 GPUs, so 4 pods
// and 32 GPU ranks.
constexpr const char* kPyTorchWorker =
    "/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0";

// The Launcher container of MpiJob(): a CPU launcher and 2 workers of 8 GPUs with 8 slots each.
constexpr const char* kMpiLauncher = "/spec/mpiReplicaSpecs/Launcher/template/spec/containers/0";

// An Indexed Job of 4 completions of 8 GPUs.
constexpr const char* kIndexedJob = R"(
apiVersion: batch/v1
kind: Job
metadata: {name: indexed, namespace: ml}
spec:
  completionMode: Indexed
  completions: 4
  parallelism: 4
  template:
    spec:
      restartPolicy: Never
      containers: [{name: trainer, image: train:1.0, resources: {limits: {nvidia.com/gpu: 8}}}]
)";
constexpr const char* kJobContainer = "/spec/template/spec/containers/0";

// 2 replicas x parallelism 2 = 4 pods of 8 GPUs.
constexpr const char* kJobSet = R"(
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js, namespace: ml}
spec:
  replicatedJobs:
    - name: workers
      replicas: 2
      template:
        spec:
          parallelism: 2
          completions: 2
          template:
            spec:
              containers: [{name: trainer, image: train:1.0, resources: {limits: {nvidia.com/gpu: 8}}}]
)";
constexpr const char* kJobSetContainer =
    "/spec/replicatedJobs/0/template/spec/template/spec/containers/0";

core::Json WithWorldSize(core::Json job, const char* container, const std::string& world_size) {
  SetEnv(job.at(core::JsonPointer(container)), "WORLD_SIZE", world_size);
  return job;
}

std::size_t Denials(const core::Json& job, const char* container, const std::string& world_size) {
  return FindingsOf(Check(WithWorldSize(job, container, world_size)), kWorldSizeMismatchRule)
      .size();
}

TEST(WorldSizeMismatch, DeniesAPyTorchJobWorldSizeThatMatchesNeitherPodsNorGpus) {
  const core::Json job = WithWorldSize(PyTorchJob(3), kPyTorchWorker, "16");
  const core::Evaluation result = Check(job);

  const auto findings = FindingsOf(result, kWorldSizeMismatchRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  const core::Finding& f = findings.front();
  EXPECT_EQ(f.level, core::Level::Deny);
  EXPECT_EQ(f.path, EnvPointer(job, "WORLD_SIZE", kPyTorchWorker));
  EXPECT_TRUE(
      Mentions(f.message, "container \"pytorch\": WORLD_SIZE=\"16\" but the job starts 4 pod(s)"));
  EXPECT_TRUE(Mentions(f.message, "WORLD_SIZE must be 4 or 32"));
  EXPECT_TRUE(Mentions(f.message, "Remove WORLD_SIZE (the operator sets it) or fix the replicas."));
  EXPECT_TRUE(LinksTo(f, "nccl-timeout"));
  EXPECT_TRUE(result.HasDeny());
}

TEST(WorldSizeMismatch, AcceptsPodsOrGpuRanksForAPyTorchJob) {
  EXPECT_EQ(Denials(PyTorchJob(3), kPyTorchWorker, "4"), 0u);
  EXPECT_EQ(Denials(PyTorchJob(3), kPyTorchWorker, "32"), 0u);
}

TEST(WorldSizeMismatch, DeniesANonNumber) {
  EXPECT_EQ(Denials(PyTorchJob(3), kPyTorchWorker, "abc"), 1u);
}

TEST(WorldSizeMismatch, SkipsAVariableReference) {
  EXPECT_EQ(Denials(PyTorchJob(3), kPyTorchWorker, "$(N)"), 0u);
}

TEST(WorldSizeMismatch, AcceptsPodsTimesNprocPerNode) {
  core::Json job = WithWorldSize(PyTorchJob(3), kPyTorchWorker, "8");
  EXPECT_EQ(FindingsOf(Check(job), kWorldSizeMismatchRule).size(), 1u);
  job["spec"]["nprocPerNode"] = 2;
  EXPECT_TRUE(FindingsOf(Check(job), kWorldSizeMismatchRule).empty());
}

TEST(WorldSizeMismatch, CountsMpiWorkersButNotTheLauncher) {
  EXPECT_EQ(Denials(MpiJob(), kMpiLauncher, "2"), 0u);
  EXPECT_EQ(Denials(MpiJob(), kMpiLauncher, "16"), 0u);

  const core::Json job = WithWorldSize(MpiJob(), kMpiLauncher, "3");
  const core::Evaluation result = Check(job);
  const auto findings = FindingsOf(result, kWorldSizeMismatchRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  EXPECT_EQ(findings.front().path, EnvPointer(job, "WORLD_SIZE", kMpiLauncher));
  EXPECT_TRUE(
      Mentions(findings.front().message, "the job starts 2 pod(s), so WORLD_SIZE must be 2 or 16"));
}

TEST(WorldSizeMismatch, AcceptsWorkersTimesSlotsPerWorker) {
  core::Json job = WithWorldSize(MpiJob(), kMpiLauncher, "8");
  EXPECT_EQ(FindingsOf(Check(job), kWorldSizeMismatchRule).size(), 1u);
  job["spec"]["slotsPerWorker"] = 4;
  EXPECT_TRUE(FindingsOf(Check(job), kWorldSizeMismatchRule).empty());
}

TEST(WorldSizeMismatch, UsesCompletionsOfAnIndexedJob) {
  EXPECT_EQ(Denials(Yaml(kIndexedJob), kJobContainer, "4"), 0u);
  EXPECT_EQ(Denials(Yaml(kIndexedJob), kJobContainer, "32"), 0u);
  EXPECT_EQ(Denials(Yaml(kIndexedJob), kJobContainer, "8"), 1u);

  core::Json job = WithWorldSize(Yaml(kIndexedJob), kJobContainer, "4");
  job["spec"].erase("parallelism");  // an Indexed Job's ranks are its completion indexes
  EXPECT_TRUE(FindingsOf(Check(job), kWorldSizeMismatchRule).empty());
}

TEST(WorldSizeMismatch, UsesParallelismOfANonIndexedJob) {
  core::Json job = WithWorldSize(Yaml(kIndexedJob), kJobContainer, "4");
  job["spec"].erase("completionMode");
  job["spec"]["parallelism"] = 2;
  const auto findings = FindingsOf(Check(job), kWorldSizeMismatchRule);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_TRUE(Mentions(findings.front().message, "must be 2 or 16"));
}

TEST(WorldSizeMismatch, MultipliesJobSetReplicasByParallelism) {
  EXPECT_EQ(Denials(Yaml(kJobSet), kJobSetContainer, "4"), 0u);
  EXPECT_EQ(Denials(Yaml(kJobSet), kJobSetContainer, "32"), 0u);

  const core::Json job = WithWorldSize(Yaml(kJobSet), kJobSetContainer, "2");
  const auto findings = FindingsOf(Check(job), kWorldSizeMismatchRule);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings.front().path, EnvPointer(job, "WORLD_SIZE", kJobSetContainer));
}

TEST(WorldSizeMismatch, NeverFiresForABarePod) {
  EXPECT_TRUE(FindingsOf(CheckPodEnv("WORLD_SIZE", "99"), kWorldSizeMismatchRule).empty());
}

TEST(WorldSizeMismatch, DoesNotFireWithoutWorldSize) {
  EXPECT_TRUE(FindingsOf(Check(PyTorchJob(3)), kWorldSizeMismatchRule).empty());
}

}  // namespace
}  // namespace ncclguard::test
