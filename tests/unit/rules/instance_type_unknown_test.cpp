#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kInstanceTypeUnknownRule = "instance-type-unknown";

core::Json PodWithoutInstanceType() {
  core::Json pod = CompliantPod();
  pod["spec"].erase("nodeSelector");
  return pod;
}

// The pod without nodeSelector, with a RequiredNodeAffinity of `yaml_terms`.
core::Json PodWithNodeAffinity(const std::string& yaml_terms) {
  core::Json pod = PodWithoutInstanceType();
  pod["spec"]["affinity"] = RequiredNodeAffinity(yaml_terms);
  return pod;
}

TEST(InstanceTypeUnknown, WarnsForAGpuPodWithoutInstanceType) {
  const core::Evaluation result = Check(PodWithoutInstanceType());

  const auto findings = FindingsOf(result, kInstanceTypeUnknownRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  const core::Finding& f = findings.front();
  EXPECT_EQ(f.level, core::Level::Warn);
  EXPECT_EQ(f.path, "/spec/nodeSelector");
  EXPECT_TRUE(Mentions(f.message, "GPU pod template has no node.kubernetes.io/instance-type"));
  EXPECT_TRUE(Mentions(f.message, "nodeSelector node.kubernetes.io/instance-type: p5.48xlarge"));
  EXPECT_TRUE(LinksTo(f, "efa-config"));
}

TEST(InstanceTypeUnknown, WarnsForAnEfaPodWithoutGpus) {
  core::Json pod = PodWithoutInstanceType();
  RemoveResource(ContainerOf(pod), kGpuKey);
  const core::Evaluation result = Check(pod);
  EXPECT_EQ(FindingsOf(result, kInstanceTypeUnknownRule).size(), 1u) << Dump(result);
}

TEST(InstanceTypeUnknown, NamesTheReplicaOfAJob) {
  const core::Evaluation result = Check(Yaml(R"(
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: llama, namespace: ml}
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers:
            - name: pytorch
              image: train:1.0
              resources:
                limits: {nvidia.com/gpu: 8}
)"));
  const auto findings = FindingsOf(result, kInstanceTypeUnknownRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  EXPECT_EQ(findings.front().path, "/spec/pytorchReplicaSpecs/Worker/template/spec/nodeSelector");
  EXPECT_TRUE(Mentions(findings.front().message, "GPU pod template Worker has no"));
}

TEST(InstanceTypeUnknown, IgnoresACpuPod) {
  const core::Evaluation result = Check(Yaml(R"(
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
    - name: web
      image: nginx:1.27
)"));
  EXPECT_TRUE(FindingsOf(result, kInstanceTypeUnknownRule).empty()) << Dump(result);
}

TEST(InstanceTypeUnknown, DoesNotFireWithANodeSelector) {
  EXPECT_TRUE(FindingsOf(Check(CompliantPod()), kInstanceTypeUnknownRule).empty());
}

TEST(InstanceTypeUnknown, DoesNotFireForAPinnedTypeOutsideTheCatalog) {
  core::Json pod = CompliantPod();
  SetInstanceType(pod, "x9.48xlarge");
  EXPECT_TRUE(FindingsOf(Check(pod), kInstanceTypeUnknownRule).empty());
}

TEST(InstanceTypeUnknown, IsSilencedByThePolicyDefault) {
  const core::Policy policy = core::ParsePolicy("defaultInstanceType: p5.48xlarge");
  const core::Evaluation result = Check(PodWithoutInstanceType(), policy);
  EXPECT_TRUE(FindingsOf(result, kInstanceTypeUnknownRule).empty()) << Dump(result);
}

TEST(InstanceTypeUnknown, ReadsASingleValueFromRequiredNodeAffinity) {
  const core::Json pod = PodWithNodeAffinity(R"(
      - matchExpressions:
          - {key: node.kubernetes.io/instance-type, operator: In, values: [p5.48xlarge]}
)");
  const core::Evaluation result = Check(pod);
  EXPECT_TRUE(FindingsOf(result, kInstanceTypeUnknownRule).empty()) << Dump(result);
}

TEST(InstanceTypeUnknown, AcceptsTwoTermsThatPinTheSameType) {
  const core::Json pod = PodWithNodeAffinity(R"(
      - matchExpressions:
          - {key: node.kubernetes.io/instance-type, operator: In, values: [p5.48xlarge]}
      - matchExpressions:
          - {key: node.kubernetes.io/instance-type, operator: In, values: [p5.48xlarge]}
)");
  EXPECT_TRUE(FindingsOf(Check(pod), kInstanceTypeUnknownRule).empty());
}

TEST(InstanceTypeUnknown, WarnsWhenNodeAffinityAllowsTwoTypes) {
  const core::Json pod = PodWithNodeAffinity(R"(
      - matchExpressions:
          - {key: node.kubernetes.io/instance-type, operator: In, values: [p5.48xlarge, p4d.24xlarge]}
)");
  EXPECT_EQ(FindingsOf(Check(pod), kInstanceTypeUnknownRule).size(), 1u);
}

TEST(InstanceTypeUnknown, WarnsWhenOredTermsPinDifferentTypes) {
  const core::Json pod = PodWithNodeAffinity(R"(
      - matchExpressions:
          - {key: node.kubernetes.io/instance-type, operator: In, values: [p5.48xlarge]}
      - matchExpressions:
          - {key: node.kubernetes.io/instance-type, operator: In, values: [p4d.24xlarge]}
)");
  EXPECT_EQ(FindingsOf(Check(pod), kInstanceTypeUnknownRule).size(), 1u);
}

TEST(InstanceTypeUnknown, WarnsForANotInExpression) {
  const core::Json pod = PodWithNodeAffinity(R"(
      - matchExpressions:
          - {key: node.kubernetes.io/instance-type, operator: NotIn, values: [p4d.24xlarge]}
)");
  EXPECT_EQ(FindingsOf(Check(pod), kInstanceTypeUnknownRule).size(), 1u);
}

}  // namespace
}  // namespace ncclguard::test
