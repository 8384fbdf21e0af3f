#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kNcclAlgoInvalidRule = "nccl-algo-invalid";

TEST(NcclAlgoInvalid, DeniesAnUnknownAlgorithm) {
  const core::Json pod = PodWithEnv("NCCL_ALGO", "Ring,Fast");
  const core::Evaluation result = Check(pod);

  const auto findings = FindingsOf(result, kNcclAlgoInvalidRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  const core::Finding& f = findings.front();
  EXPECT_EQ(f.level, core::Level::Deny);
  EXPECT_EQ(f.path, EnvPointer(pod, "NCCL_ALGO"));
  EXPECT_TRUE(Mentions(
      f.message,
      "container \"pytorch\": NCCL_ALGO=\"Ring,Fast\" has the unknown algorithm \"Fast\""));
  EXPECT_TRUE(
      Mentions(f.message, "Use Ring, Tree, CollnetDirect, CollnetChain, NVLS, NVLSTree or PAT"));
  EXPECT_TRUE(Mentions(f.message, "or remove NCCL_ALGO"));
  EXPECT_TRUE(LinksTo(f, "advanced-tuning"));
}

TEST(NcclAlgoInvalid, DeniesAnUnknownAlgorithmInAPerCollectiveList) {
  const auto findings =
      FindingsOf(CheckPodEnv("NCCL_ALGO", "allreduce:tree;allgather:fast"), kNcclAlgoInvalidRule);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_TRUE(Mentions(findings.front().message, "unknown algorithm \"fast\""));
}

TEST(NcclAlgoInvalid, AcceptsKnownAlgorithmsInAnyCase) {
  for (const char* value : {"ring,tree", "Ring", "^NVLS,CollnetDirect",
                            "Ring,Tree,CollnetDirect,CollnetChain,NVLS,NVLSTree,PAT", "nvlstree"}) {
    const core::Evaluation result = CheckPodEnv("NCCL_ALGO", value);
    EXPECT_TRUE(FindingsOf(result, kNcclAlgoInvalidRule).empty()) << value << "\n" << Dump(result);
  }
}

TEST(NcclAlgoInvalid, AcceptsPerCollectiveLists) {
  for (const char* value : {"allreduce:tree;allgather:ring", "allreduce:^nvls,collnetdirect"}) {
    const core::Evaluation result = CheckPodEnv("NCCL_ALGO", value);
    EXPECT_TRUE(FindingsOf(result, kNcclAlgoInvalidRule).empty()) << value << "\n" << Dump(result);
  }
}

// NCCL's parseList lets the first list go without a prefix; this is its own documented example.
TEST(NcclAlgoInvalid, AcceptsAPrefixlessFirstListBeforePerCollectiveLists) {
  const core::Evaluation result =
      CheckPodEnv("NCCL_ALGO", "ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring");
  EXPECT_TRUE(FindingsOf(result, kNcclAlgoInvalidRule).empty()) << Dump(result);
}

TEST(NcclAlgoInvalid, IgnoresAnEmptyValue) {
  EXPECT_TRUE(FindingsOf(CheckPodEnv("NCCL_ALGO", ""), kNcclAlgoInvalidRule).empty());
}

TEST(NcclAlgoInvalid, DoesNotFireOnACompliantPod) {
  EXPECT_TRUE(FindingsOf(Check(CompliantPod()), kNcclAlgoInvalidRule).empty());
}

}  // namespace
}  // namespace ncclguard::test
