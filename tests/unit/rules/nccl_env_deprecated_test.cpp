#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kNcclEnvDeprecatedRule = "nccl-env-deprecated";

struct Case {
  const char* old_name;
  const char* new_name;
};

constexpr Case kCases[] = {
    {"NCCL_MIN_NCHANNELS", "NCCL_MIN_CTAS"},
    {"NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS"},
    {"NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING"},
};

TEST(NcclEnvDeprecated, WarnsForEachDeprecatedNameAndNamesItsReplacement) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.old_name);
    const core::Json pod = PodWithEnv(c.old_name, "4");
    const core::Evaluation result = Check(pod);

    const auto findings = FindingsOf(result, kNcclEnvDeprecatedRule);
    ASSERT_EQ(findings.size(), 1u) << Dump(result);
    const core::Finding& f = findings.front();
    EXPECT_EQ(f.level, core::Level::Warn);
    EXPECT_EQ(f.path, EnvPointer(pod, c.old_name));
    EXPECT_TRUE(Mentions(f.message, "container \"pytorch\" sets " + std::string(c.old_name) +
                                        ", which is deprecated"));
    EXPECT_TRUE(Mentions(f.message, "Use " + std::string(c.new_name) + " instead."));
    EXPECT_TRUE(LinksTo(f, "advanced-tuning"));
    EXPECT_FALSE(result.HasDeny());
  }
}

TEST(NcclEnvDeprecated, WarnsOncePerDeprecatedVariable) {
  core::Json pod = CompliantPod();
  SetEnv(ContainerOf(pod), "NCCL_MIN_NCHANNELS", "4");
  SetEnv(ContainerOf(pod), "NCCL_MAX_NCHANNELS", "16");
  const auto findings = FindingsOf(Check(pod), kNcclEnvDeprecatedRule);
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].path, EnvPointer(pod, "NCCL_MIN_NCHANNELS"));
  EXPECT_EQ(findings[1].path, EnvPointer(pod, "NCCL_MAX_NCHANNELS"));
}

TEST(NcclEnvDeprecated, WarnsWhenTheValueComesFromAConfigMap) {
  core::Json pod = CompliantPod();
  ContainerOf(pod)["env"].push_back(Yaml(
      "var: {name: NCCL_MAX_NCHANNELS, valueFrom: {configMapKeyRef: {name: nccl, key: channels}}}")
                                        ["var"]);
  EXPECT_EQ(FindingsOf(Check(pod), kNcclEnvDeprecatedRule).size(), 1u);
}

TEST(NcclEnvDeprecated, AcceptsTheReplacements) {
  core::Json pod = CompliantPod();
  SetEnv(ContainerOf(pod), "NCCL_MIN_CTAS", "4");
  SetEnv(ContainerOf(pod), "NCCL_MAX_CTAS", "16");
  EXPECT_TRUE(FindingsOf(Check(pod), kNcclEnvDeprecatedRule).empty());
}

TEST(NcclEnvDeprecated, DoesNotFireOnACompliantPod) {
  EXPECT_TRUE(FindingsOf(Check(CompliantPod()), kNcclEnvDeprecatedRule).empty());
}

}  // namespace
}  // namespace ncclguard::test
