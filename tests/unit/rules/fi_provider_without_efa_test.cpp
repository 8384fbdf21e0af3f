#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kFiProviderWithoutEfaRule = "fi-provider-without-efa";

core::Json CompliantPodLessEfa() {
  core::Json pod = CompliantPod();
  RemoveResource(ContainerOf(pod), kEfaKey);
  return pod;
}

TEST(FiProviderWithoutEfa, DeniesACpuContainerThatSetsFiProviderEfa) {
  core::Json pod = CompliantPod();
  SetEnv(AddCpuSidecar(pod), "FI_PROVIDER", "efa");
  const core::Evaluation result = Check(pod);

  const auto findings = FindingsOf(result, kFiProviderWithoutEfaRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  const core::Finding& f = findings.front();
  EXPECT_EQ(f.level, core::Level::Deny);
  EXPECT_EQ(f.path, EnvPointer(pod, "FI_PROVIDER", "/spec/containers/1"));
  EXPECT_TRUE(Mentions(f.message, "container \"sidecar\" sets FI_PROVIDER=efa"));
  EXPECT_TRUE(Mentions(f.message, "requests no vpc.amazonaws.com/efa"));
  EXPECT_TRUE(Mentions(f.message, "or remove FI_PROVIDER"));
  EXPECT_TRUE(LinksTo(f, "efa-tcp-fallback"));
}

TEST(FiProviderWithoutEfa, DeniesAGpuContainerWhoseInstanceTypeIsUnknown) {
  core::Json pod = CompliantPodLessEfa();
  pod["spec"].erase("nodeSelector");
  const core::Evaluation result = Check(pod);

  const auto findings = FindingsOf(result, kFiProviderWithoutEfaRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  EXPECT_EQ(findings.front().path, EnvPointer(pod, "FI_PROVIDER"));
  EXPECT_TRUE(Mentions(findings.front().message, "container \"pytorch\""));
}

TEST(FiProviderWithoutEfa, DoesNotDenyAP5GpuContainerBecauseTheFixAddsEfa) {
  const core::Evaluation result = Check(CompliantPodLessEfa());
  EXPECT_TRUE(FindingsOf(result, kFiProviderWithoutEfaRule).empty()) << Dump(result);
  EXPECT_EQ(FindingsOf(result, "efa-resources-missing").size(), 1u) << Dump(result);
  EXPECT_FALSE(result.HasDeny()) << Dump(result);
}

TEST(FiProviderWithoutEfa, DeniesWhenThePolicyDisablesTheEfaFix) {
  const core::Policy policy = core::ParsePolicy("rules: {efa-resources-missing: {enabled: false}}");
  const core::Evaluation result = Check(CompliantPodLessEfa(), policy);
  EXPECT_EQ(FindingsOf(result, kFiProviderWithoutEfaRule).size(), 1u) << Dump(result);
}

TEST(FiProviderWithoutEfa, DeniesAnExplicitZeroEfaRequest) {
  core::Json pod = CompliantPod();
  SetResource(ContainerOf(pod), kEfaKey, 0);
  EXPECT_EQ(FindingsOf(Check(pod), kFiProviderWithoutEfaRule).size(), 1u);
}

TEST(FiProviderWithoutEfa, IgnoresOtherProviders) {
  core::Json pod = CompliantPodLessEfa();
  pod["spec"].erase("nodeSelector");
  SetEnv(ContainerOf(pod), "FI_PROVIDER", "tcp");
  const core::Evaluation result = Check(pod);
  EXPECT_TRUE(FindingsOf(result, kFiProviderWithoutEfaRule).empty()) << Dump(result);
}

TEST(FiProviderWithoutEfa, DoesNotFireOnACompliantPod) {
  EXPECT_TRUE(FindingsOf(Check(CompliantPod()), kFiProviderWithoutEfaRule).empty());
}

}  // namespace
}  // namespace ncclguard::test
