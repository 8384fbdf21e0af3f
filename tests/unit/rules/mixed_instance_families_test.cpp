#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kMixedInstanceFamiliesRule = "mixed-instance-families";

constexpr const char* kMasterSpec = "/spec/pytorchReplicaSpecs/Master/template/spec";
constexpr const char* kWorkerSpec = "/spec/pytorchReplicaSpecs/Worker/template/spec";

core::Json JobOn(const std::string& master_type, const std::string& worker_type) {
  core::Json job = PyTorchJob(3, worker_type);
  job[core::JsonPointer(kMasterSpec)]["nodeSelector"][kInstanceTypeKey] = master_type;
  return job;
}

TEST(MixedInstanceFamilies, DeniesP4dMasterWithP5Workers) {
  const core::Evaluation result = Check(JobOn("p4d.24xlarge", "p5.48xlarge"));

  const auto findings = FindingsOf(result, kMixedInstanceFamiliesRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  const core::Finding& f = findings.front();
  EXPECT_EQ(f.level, core::Level::Deny);
  EXPECT_EQ(f.path, kWorkerSpec);
  EXPECT_TRUE(Mentions(
      f.message, "replica Worker targets p5.48xlarge but replica Master targets p4d.24xlarge"));
  EXPECT_TRUE(Mentions(f.message, "Pin all replicas to one instance type."));
  EXPECT_TRUE(LinksTo(f, "advanced-tuning"));
  EXPECT_TRUE(result.HasDeny());
}

TEST(MixedInstanceFamilies, AcceptsOneFamily) {
  const core::Evaluation result = Check(JobOn("p5.48xlarge", "p5.48xlarge"));
  EXPECT_TRUE(FindingsOf(result, kMixedInstanceFamiliesRule).empty()) << Dump(result);
}

TEST(MixedInstanceFamilies, AcceptsACpuLauncherOnAnotherFamily) {
  const core::Evaluation result = Check(Yaml(R"(
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: nccl-tests, namespace: ml}
spec:
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          nodeSelector: {node.kubernetes.io/instance-type: m5.xlarge}
          containers: [{name: launcher, image: train:1.0}]
    Worker:
      replicas: 2
      template:
        spec:
          nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
          containers: [{name: worker, image: train:1.0, resources: {limits: {nvidia.com/gpu: 8}}}]
)"));
  EXPECT_TRUE(FindingsOf(result, kMixedInstanceFamiliesRule).empty()) << Dump(result);
}

TEST(MixedInstanceFamilies, IgnoresAReplicaWithoutInstanceType) {
  core::Json job = JobOn("p4d.24xlarge", "p5.48xlarge");
  job[core::JsonPointer(kMasterSpec)].erase("nodeSelector");
  const core::Evaluation result = Check(job);
  EXPECT_TRUE(FindingsOf(result, kMixedInstanceFamiliesRule).empty()) << Dump(result);
}

TEST(MixedInstanceFamilies, ComparesThePolicyDefaultInstanceType) {
  core::Json job = JobOn("p4d.24xlarge", "p5.48xlarge");
  job[core::JsonPointer(kMasterSpec)].erase("nodeSelector");
  const core::Policy policy = core::ParsePolicy("defaultInstanceType: p4d.24xlarge");
  const auto findings = FindingsOf(Check(job, policy), kMixedInstanceFamiliesRule);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings.front().path, kWorkerSpec);
}

TEST(MixedInstanceFamilies, NeverFiresForABarePod) {
  EXPECT_TRUE(FindingsOf(Check(CompliantPod()), kMixedInstanceFamiliesRule).empty());
}

}  // namespace
}  // namespace ncclguard::test
