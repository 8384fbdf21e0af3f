#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kCollnetOnEfaRule = "collnet-on-efa";

TEST(CollnetOnEfa, WarnsWhenCollnetIsEnabledOnAnEfaPod) {
  const core::Json pod = PodWithEnv("NCCL_COLLNET_ENABLE", "1");
  const core::Evaluation result = Check(pod);

  const auto findings = FindingsOf(result, kCollnetOnEfaRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  const core::Finding& f = findings.front();
  EXPECT_EQ(f.level, core::Level::Warn);
  EXPECT_EQ(f.path, EnvPointer(pod, "NCCL_COLLNET_ENABLE"));
  EXPECT_TRUE(Mentions(f.message, "container \"pytorch\" sets NCCL_COLLNET_ENABLE=1"));
  EXPECT_TRUE(Mentions(f.message, "Remove it or set it to 0."));
  EXPECT_TRUE(LinksTo(f, "advanced-tuning"));
  EXPECT_FALSE(result.HasDeny());
}

TEST(CollnetOnEfa, WarnsOnAPodThatRequestsEfaWithoutAnInstanceType) {
  core::Json pod = CompliantPod();
  pod["spec"].erase("nodeSelector");
  SetEnv(ContainerOf(pod), "NCCL_COLLNET_ENABLE", "1");
  EXPECT_EQ(FindingsOf(Check(pod), kCollnetOnEfaRule).size(), 1u);
}

TEST(CollnetOnEfa, IgnoresAPodWithoutEfa) {
  const core::Evaluation result = Check(Yaml(R"(
apiVersion: v1
kind: Pod
metadata: {name: ib-trainer}
spec:
  containers:
    - name: pytorch
      image: train:1.0
      env: [{name: NCCL_COLLNET_ENABLE, value: "1"}]
      resources: {limits: {nvidia.com/gpu: 8}}
)"));
  EXPECT_TRUE(FindingsOf(result, kCollnetOnEfaRule).empty()) << Dump(result);
}

TEST(CollnetOnEfa, IgnoresCollnetDisabled) {
  EXPECT_TRUE(FindingsOf(CheckPodEnv("NCCL_COLLNET_ENABLE", "0"), kCollnetOnEfaRule).empty());
}

TEST(CollnetOnEfa, DoesNotFireOnACompliantPod) {
  EXPECT_TRUE(FindingsOf(Check(CompliantPod()), kCollnetOnEfaRule).empty());
}

}  // namespace
}  // namespace ncclguard::test
