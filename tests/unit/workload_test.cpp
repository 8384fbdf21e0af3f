#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/workload.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

using core::WorkloadKind;

TEST(Workload, FindsPyTorchJobReplicasWithRolesAndCounts) {
  const auto w = core::ParseWorkload(Yaml(ReadFile(SourcePath("examples/pytorchjob-p5.yaml"))));
  ASSERT_TRUE(w);
  EXPECT_EQ(w->kind, WorkloadKind::PyTorchJob);
  ASSERT_EQ(w->templates.size(), 2u);
  EXPECT_EQ(w->templates[0].role, "Master");
  EXPECT_EQ(w->templates[0].pod_spec.to_string(), "/spec/pytorchReplicaSpecs/Master/template/spec");
  EXPECT_EQ(w->templates[1].role, "Worker");
  EXPECT_EQ(w->templates[1].ranks_per_pod, 8);
}

TEST(Workload, FindsMpiJobLauncherAndWorkers) {
  const auto w = core::ParseWorkload(Yaml(ReadFile(SourcePath("examples/mpijob-p4d.yaml"))));
  ASSERT_TRUE(w);
  EXPECT_EQ(w->kind, WorkloadKind::MpiJob);
  ASSERT_EQ(w->templates.size(), 2u);
  EXPECT_EQ(w->templates[1].role, "Worker");
  EXPECT_EQ(w->templates[1].pods, 4);
  EXPECT_EQ(w->templates[1].ranks_per_pod, 8);
}

TEST(Workload, FindsJobSetReplicatedJobsTimesParallelism) {
  const auto w = core::ParseWorkload(Yaml(ReadFile(SourcePath("examples/jobset-p5en.yaml"))));
  ASSERT_TRUE(w);
  ASSERT_EQ(w->templates.size(), 1u);
  EXPECT_EQ(w->templates[0].role, "workers");
  EXPECT_EQ(w->templates[0].pods, 4);
  EXPECT_EQ(w->templates[0].pod_spec.to_string(),
            "/spec/replicatedJobs/0/template/spec/template/spec");
}

TEST(Workload, IndexedJobCountsCompletionsAndPodIsOne) {
  const auto job = core::ParseWorkload(Yaml(ReadFile(SourcePath("examples/indexed-job-p5.yaml"))));
  ASSERT_TRUE(job);
  EXPECT_EQ(job->kind, WorkloadKind::BatchJob);
  EXPECT_EQ(job->templates.at(0).pods, 4);
  const auto pod = core::ParseWorkload(CompliantPod());
  ASSERT_TRUE(pod);
  EXPECT_EQ(pod->templates.at(0).pod_spec.to_string(), "/spec");
}

TEST(Workload, UnknownKindsPassThroughUntouched) {
  EXPECT_FALSE(core::ParseWorkload(Yaml("apiVersion: apps/v1\nkind: Deployment\nspec: {}")));
  EXPECT_FALSE(core::ParseWorkload(Yaml("apiVersion: v1\nkind: ConfigMap\ndata: {a: b}")));
  EXPECT_FALSE(core::ParseWorkload(Yaml("kind: Pod\nspec: {}")));  // no apiVersion
  const auto result =
      Check(Yaml("apiVersion: apps/v1\nkind: Deployment\nspec: {template: {spec: {}}}"));
  EXPECT_FALSE(result.recognized);
  EXPECT_TRUE(result.findings.empty());
  EXPECT_TRUE(result.patch.empty());
}

TEST(Workload, WrongTypesAreInputErrorsNamingThePointer) {
  try {
    Check(Yaml("apiVersion: v1\nkind: Pod\nspec:\n  containers: nope\n"));
    FAIL();
  } catch (const core::InputError& e) {
    EXPECT_STREQ(e.what(), "/spec/containers: expected a list, got string");
  }
  EXPECT_THROW(
      Check(Yaml("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nspec:\n  pytorchReplicaSpecs:\n"
                 "    Worker: {replicas: two, template: {spec: {}}}\n")),
      core::InputError);
  EXPECT_THROW(
      Check(Yaml(
          "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    env: [{value: x}]\n")),
      core::InputError);
  EXPECT_THROW(
      Check(Yaml("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    resources:\n"
                 "      limits: {nvidia.com/gpu: lots}\n")),
      core::InputError);
  EXPECT_THROW(Check(Yaml("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - 7\n")),
               core::InputError);
  EXPECT_THROW(Check(Yaml("apiVersion: v1\nkind: Pod\nspec: [1]\n")), core::InputError);
}

}  // namespace
}  // namespace ncclguard::test
