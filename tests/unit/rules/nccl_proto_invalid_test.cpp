#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kNcclProtoInvalidRule = "nccl-proto-invalid";

TEST(NcclProtoInvalid, DeniesAnUnknownProtocol) {
  const core::Json pod = PodWithEnv("NCCL_PROTO", "fast");
  const core::Evaluation result = Check(pod);

  const auto findings = FindingsOf(result, kNcclProtoInvalidRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  const core::Finding& f = findings.front();
  EXPECT_EQ(f.level, core::Level::Deny);
  EXPECT_EQ(f.path, EnvPointer(pod, "NCCL_PROTO"));
  EXPECT_TRUE(Mentions(
      f.message, "container \"pytorch\": NCCL_PROTO=\"fast\" has the unknown protocol \"fast\""));
  EXPECT_TRUE(Mentions(f.message, "Use LL, LL128 or Simple"));
  EXPECT_TRUE(Mentions(f.message, "or remove NCCL_PROTO"));
  EXPECT_TRUE(LinksTo(f, "efa-config"));
  EXPECT_TRUE(result.HasDeny());
}

TEST(NcclProtoInvalid, ReportsOnlyTheFirstUnknownToken) {
  const auto findings =
      FindingsOf(CheckPodEnv("NCCL_PROTO", "LL,Fast,Slow"), kNcclProtoInvalidRule);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_TRUE(Mentions(findings.front().message, "unknown protocol \"Fast\""));
}

TEST(NcclProtoInvalid, DeniesAnEmptyEntry) {
  EXPECT_EQ(FindingsOf(CheckPodEnv("NCCL_PROTO", "LL,,Simple"), kNcclProtoInvalidRule).size(), 1u);
}

TEST(NcclProtoInvalid, DeniesAnExclusionMarkAlone) {
  EXPECT_EQ(FindingsOf(CheckPodEnv("NCCL_PROTO", "^"), kNcclProtoInvalidRule).size(), 1u);
}

TEST(NcclProtoInvalid, AcceptsKnownProtocols) {
  // NCCL compares protocol names case-insensitively, so "simple" is valid.
  for (const char* value : {"^LL128", "LL,Simple", "simple", "LL128", "^LL,LL128"}) {
    const core::Evaluation result = CheckPodEnv("NCCL_PROTO", value);
    EXPECT_TRUE(FindingsOf(result, kNcclProtoInvalidRule).empty()) << value << "\n" << Dump(result);
  }
}

// NCCL parses NCCL_PROTO with the same parseList as NCCL_ALGO; both values are the examples in
// NCCL's own source.
TEST(NcclProtoInvalid, AcceptsPerCollectiveLists) {
  for (const char* value : {"LL,Simple;allreduce:^LL", "^LL128;allreduce:LL128"}) {
    const core::Evaluation result = CheckPodEnv("NCCL_PROTO", value);
    EXPECT_TRUE(FindingsOf(result, kNcclProtoInvalidRule).empty()) << value << "\n" << Dump(result);
  }
}

TEST(NcclProtoInvalid, IgnoresAnEmptyValue) {
  EXPECT_TRUE(FindingsOf(CheckPodEnv("NCCL_PROTO", ""), kNcclProtoInvalidRule).empty());
}

TEST(NcclProtoInvalid, DoesNotFireOnACompliantPod) {
  EXPECT_TRUE(FindingsOf(Check(CompliantPod()), kNcclProtoInvalidRule).empty());
}

}  // namespace
}  // namespace ncclguard::test
