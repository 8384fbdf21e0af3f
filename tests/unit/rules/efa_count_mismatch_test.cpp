#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kEfaCountMismatchRule = "efa-count-mismatch";

core::Json PodWith(const std::string& instance_type, int gpus, int efa) {
  core::Json pod = CompliantPod();
  SetInstanceType(pod, instance_type);
  SetResource(ContainerOf(pod), kGpuKey, gpus);
  SetResource(ContainerOf(pod), kEfaKey, efa);
  return pod;
}

TEST(EfaCountMismatch, DeniesSixteenEfaOnAnEightGpuP5Container) {
  const core::Evaluation result = Check(PodWith("p5.48xlarge", 8, 16));

  const auto findings = FindingsOf(result, kEfaCountMismatchRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  const core::Finding& f = findings.front();
  EXPECT_EQ(f.level, core::Level::Deny);
  EXPECT_EQ(f.path, "/spec/containers/0/resources");
  EXPECT_TRUE(Mentions(f.message, "container \"pytorch\" requests 16 vpc.amazonaws.com/efa"));
  EXPECT_TRUE(Mentions(f.message, "p5.48xlarge (32 EFA / 8 GPUs) need 32"));
  EXPECT_TRUE(Mentions(f.message, "Set vpc.amazonaws.com/efa: 32 in requests and limits"));
  EXPECT_TRUE(LinksTo(f, "efa-config"));
  EXPECT_TRUE(result.HasDeny());
  EXPECT_EQ(result.patch, core::Json::array()) << "a deny rule never patches";
}

TEST(EfaCountMismatch, DeniesAnExplicitZero) {
  const core::Evaluation result = Check(PodWith("p5.48xlarge", 8, 0));
  const auto findings = FindingsOf(result, kEfaCountMismatchRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  EXPECT_TRUE(Mentions(findings.front().message, "requests 0"));
}

TEST(EfaCountMismatch, DeniesOneEfaTooManyForOneGpuOnP4d) {
  const core::Evaluation result = Check(PodWith("p4d.24xlarge", 1, 2));
  const auto findings = FindingsOf(result, kEfaCountMismatchRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  EXPECT_TRUE(Mentions(findings.front().message, "need 1"));
}

TEST(EfaCountMismatch, AcceptsTheRoundedUpShareForOneGpuOnP4d) {
  const core::Evaluation result = Check(PodWith("p4d.24xlarge", 1, 1));
  EXPECT_TRUE(FindingsOf(result, kEfaCountMismatchRule).empty()) << Dump(result);
}

TEST(EfaCountMismatch, AcceptsSixteenForFourGpusOnP5) {
  const core::Evaluation result = Check(PodWith("p5.48xlarge", 4, 16));
  EXPECT_TRUE(FindingsOf(result, kEfaCountMismatchRule).empty()) << Dump(result);
}

TEST(EfaCountMismatch, DoesNotFireOnACompliantPod) {
  EXPECT_TRUE(FindingsOf(Check(CompliantPod()), kEfaCountMismatchRule).empty());
}

TEST(EfaCountMismatch, IgnoresAnInstanceTypeOutsideTheCatalog) {
  const core::Evaluation result = Check(PodWith("x9.48xlarge", 8, 1));
  EXPECT_TRUE(FindingsOf(result, kEfaCountMismatchRule).empty()) << Dump(result);
}

TEST(EfaCountMismatch, IgnoresEfaOnACpuContainer) {
  core::Json pod = CompliantPod();
  SetResource(AddCpuSidecar(pod), kEfaKey, 1);
  const core::Evaluation result = Check(pod);
  EXPECT_TRUE(FindingsOf(result, kEfaCountMismatchRule).empty()) << Dump(result);
}

}  // namespace
}  // namespace ncclguard::test
