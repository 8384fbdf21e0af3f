#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kRule = "fi-provider-without-efa";

core::Json PodWithoutEfa() {
  core::Json pod = CompliantPod();
  RemoveResource(ContainerOf(pod), kEfaKey);
  return pod;
}

TEST(FiProviderWithoutEfa, DeniesACpuContainerThatSetsFiProviderEfa) {
  core::Json pod = CompliantPod();
  SetEnv(AddCpuSidecar(pod), "FI_PROVIDER", "efa");
  const core::Evaluation result = Check(pod);

  const auto findings = FindingsOf(result, kRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  const core::Finding& f = findings.front();
  EXPECT_EQ(f.level, core::Level::Deny);
  EXPECT_EQ(f.path, "/spec/containers/1/env/0");
  EXPECT_TRUE(Mentions(f.message, "container \"sidecar\" sets FI_PROVIDER=efa"));
  EXPECT_TRUE(Mentions(f.message, "requests no vpc.amazonaws.com/efa"));
  EXPECT_TRUE(Mentions(f.message, "or remove FI_PROVIDER"));
  EXPECT_TRUE(LinksTo(f, "efa-tcp-fallback"));
}

TEST(FiProviderWithoutEfa, DeniesAGpuContainerWhoseInstanceTypeIsUnknown) {
  core::Json pod = PodWithoutEfa();
  pod["spec"].erase("nodeSelector");
  const core::Evaluation result = Check(pod);

  const auto findings = FindingsOf(result, kRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  EXPECT_EQ(findings.front().path, "/spec/containers/0/env/0");
  EXPECT_TRUE(Mentions(findings.front().message, "container \"pytorch\""));
}

TEST(FiProviderWithoutEfa, DoesNotDenyAP5GpuContainerBecauseTheFixAddsEfa) {
  const core::Evaluation result = Check(PodWithoutEfa());
  EXPECT_TRUE(FindingsOf(result, kRule).empty()) << Dump(result);
  EXPECT_EQ(FindingsOf(result, "efa-resources-missing").size(), 1u) << Dump(result);
  EXPECT_FALSE(result.HasDeny()) << Dump(result);
}

TEST(FiProviderWithoutEfa, DeniesWhenThePolicyDisablesTheEfaFix) {
  const core::Policy policy = core::ParsePolicy("rules: {efa-resources-missing: {enabled: false}}");
  const core::Evaluation result = Check(PodWithoutEfa(), policy);
  EXPECT_EQ(FindingsOf(result, kRule).size(), 1u) << Dump(result);
}

TEST(FiProviderWithoutEfa, DeniesAnExplicitZeroEfaRequest) {
  core::Json pod = CompliantPod();
  SetResource(ContainerOf(pod), kEfaKey, 0);
  EXPECT_EQ(FindingsOf(Check(pod), kRule).size(), 1u);
}

TEST(FiProviderWithoutEfa, IgnoresOtherProviders) {
  core::Json pod = PodWithoutEfa();
  pod["spec"].erase("nodeSelector");
  SetEnv(ContainerOf(pod), "FI_PROVIDER", "tcp");
  const core::Evaluation result = Check(pod);
  EXPECT_TRUE(FindingsOf(result, kRule).empty()) << Dump(result);
}

TEST(FiProviderWithoutEfa, DoesNotFireOnACompliantPod) {
  EXPECT_TRUE(FindingsOf(Check(CompliantPod()), kRule).empty());
}

}  // namespace
}  // namespace ncclguard::test
