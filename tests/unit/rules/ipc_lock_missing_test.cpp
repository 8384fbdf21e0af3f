#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kIpcLockMissingRule = "ipc-lock-missing";

core::Json PodWithCapabilities(const core::Json& add) {
  core::Json pod = CompliantPod();
  ContainerOf(pod)["securityContext"]["capabilities"]["add"] = add;
  return pod;
}

core::Json PodWithoutSecurityContext() {
  core::Json pod = CompliantPod();
  ContainerOf(pod).erase("securityContext");
  return pod;
}

TEST(IpcLockMissing, AddsASecurityContextWithIpcLock) {
  const core::Evaluation result = Check(PodWithoutSecurityContext());

  const auto findings = FindingsOf(result, kIpcLockMissingRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  const core::Finding& f = findings.front();
  EXPECT_EQ(f.level, core::Level::Fix);
  EXPECT_EQ(f.path, "/spec/containers/0/securityContext");
  EXPECT_TRUE(
      Mentions(f.message, "container \"pytorch\" uses EFA but lacks the IPC_LOCK capability"));
  EXPECT_TRUE(Mentions(f.message, "Add IPC_LOCK to securityContext.capabilities.add"));
  EXPECT_TRUE(LinksTo(f, "memlock"));

  const core::Json value = {{"capabilities", {{"add", {"IPC_LOCK"}}}}};
  EXPECT_EQ(result.patch, core::Json::array({AddOp("/spec/containers/0/securityContext", value)}));
  EXPECT_EQ(result.fixed.at(core::JsonPointer("/spec/containers/0/securityContext")), value);
}

TEST(IpcLockMissing, AppendsToAnExistingCapabilitiesList) {
  const core::Evaluation result = Check(PodWithCapabilities({"NET_ADMIN"}));
  EXPECT_EQ(result.patch,
            core::Json::array(
                {AddOp("/spec/containers/0/securityContext/capabilities/add/-", "IPC_LOCK")}));
  EXPECT_EQ(
      result.fixed.at(core::JsonPointer("/spec/containers/0/securityContext/capabilities/add")),
      core::Json::array({"NET_ADMIN", "IPC_LOCK"}));
}

TEST(IpcLockMissing, FixIsIdempotent) {
  for (const core::Json& pod : {PodWithoutSecurityContext(), PodWithCapabilities({"NET_ADMIN"})}) {
    const core::Evaluation result = Check(pod);
    ASSERT_FALSE(result.patch.empty());
    EXPECT_EQ(RepatchOf(result), core::Json::array());
  }
}

TEST(IpcLockMissing, AcceptsTheCapIpcLockSpelling) {
  const core::Evaluation result = Check(PodWithCapabilities({"CAP_IPC_LOCK"}));
  EXPECT_TRUE(FindingsOf(result, kIpcLockMissingRule).empty()) << Dump(result);
  EXPECT_EQ(result.patch, core::Json::array());
}

TEST(IpcLockMissing, SkipsAPrivilegedContainer) {
  core::Json pod = PodWithoutSecurityContext();
  ContainerOf(pod)["securityContext"]["privileged"] = true;
  const core::Evaluation result = Check(pod);
  EXPECT_TRUE(FindingsOf(result, kIpcLockMissingRule).empty()) << Dump(result);
  EXPECT_EQ(result.patch, core::Json::array());
}

TEST(IpcLockMissing, LeavesCpuContainersOfAnEfaPodAlone) {
  core::Json pod = CompliantPod();
  AddCpuSidecar(pod);
  const core::Evaluation result = Check(pod);
  EXPECT_TRUE(FindingsOf(result, kIpcLockMissingRule).empty()) << Dump(result);
}

TEST(IpcLockMissing, FixesAContainerThatRequestsEfaWithoutAnInstanceType) {
  core::Json pod = PodWithoutSecurityContext();
  pod["spec"].erase("nodeSelector");
  RemoveResource(ContainerOf(pod), kGpuKey);
  const core::Evaluation result = Check(pod);
  EXPECT_EQ(FindingsOf(result, kIpcLockMissingRule).size(), 1u) << Dump(result);
}

TEST(IpcLockMissing, DoesNotFireOnACompliantPod) {
  EXPECT_TRUE(FindingsOf(Check(CompliantPod()), kIpcLockMissingRule).empty());
}

TEST(IpcLockMissing, DemotedToWarnReportsWithoutPatching) {
  const core::Policy policy = core::ParsePolicy("rules: {ipc-lock-missing: {level: warn}}");
  const core::Json pod = PodWithoutSecurityContext();
  const core::Evaluation result = Check(pod, policy);

  const auto findings = FindingsOf(result, kIpcLockMissingRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  EXPECT_EQ(findings.front().level, core::Level::Warn);
  EXPECT_EQ(findings.front().path, "/spec/containers/0/securityContext");
  EXPECT_EQ(result.patch, core::Json::array());
  EXPECT_EQ(result.fixed, pod);
  EXPECT_FALSE(result.HasDeny());
}

TEST(IpcLockMissing, DisabledByPolicyIsSilent) {
  const core::Policy policy = core::ParsePolicy("rules: {ipc-lock-missing: {enabled: false}}");
  const core::Evaluation result = Check(PodWithoutSecurityContext(), policy);
  EXPECT_TRUE(FindingsOf(result, kIpcLockMissingRule).empty()) << Dump(result);
  EXPECT_EQ(result.patch, core::Json::array());
}

}  // namespace
}  // namespace ncclguard::test
