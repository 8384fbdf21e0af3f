#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kNcclDebugMissingRule = "nccl-debug-missing";

core::Json Env(const std::string& name, const std::string& value) {
  return {{"name", name}, {"value", value}};
}

core::Json PodWithoutDebug() {
  core::Json pod = CompliantPod();
  RemoveEnv(ContainerOf(pod), "NCCL_DEBUG");
  RemoveEnv(ContainerOf(pod), "NCCL_DEBUG_SUBSYS");
  return pod;
}

TEST(NcclDebugMissing, AddsInfoAndTheInitNetSubsystems) {
  const core::Evaluation result = Check(PodWithoutDebug());
  const auto findings = FindingsOf(result, kNcclDebugMissingRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  EXPECT_EQ(findings[0].level, core::Level::Fix);
  EXPECT_TRUE(LinksTo(findings[0], "efa-tcp-fallback"));
  EXPECT_EQ(
      result.patch,
      core::Json::array({AddOp("/spec/containers/0/env/-", Env("NCCL_DEBUG", "INFO")),
                         AddOp("/spec/containers/0/env/-", Env("NCCL_DEBUG_SUBSYS", "INIT,NET"))}));
  EXPECT_EQ(RepatchOf(result), core::Json::array());
}

TEST(NcclDebugMissing, NeverOverridesAUserValue) {
  for (const std::string level : {"WARN", "VERSION", "TRACE", ""}) {
    core::Json pod = PodWithoutDebug();
    SetEnv(ContainerOf(pod), "NCCL_DEBUG", level);
    const core::Evaluation result = Check(pod);
    EXPECT_TRUE(FindingsOf(result, kNcclDebugMissingRule).empty()) << level;
    EXPECT_EQ(result.patch, core::Json::array()) << level;
  }
}

TEST(NcclDebugMissing, KeepsAUserSubsystemList) {
  core::Json pod = PodWithoutDebug();
  SetEnv(ContainerOf(pod), "NCCL_DEBUG_SUBSYS", "INIT,TUNING");
  const core::Evaluation result = Check(pod);
  EXPECT_EQ(result.patch,
            core::Json::array({AddOp("/spec/containers/0/env/-", Env("NCCL_DEBUG", "INFO"))}));
}

TEST(NcclDebugMissing, OffWhenThePolicySaysSo) {
  const core::Policy policy = core::ParsePolicy("rules: {nccl-debug-missing: {enabled: false}}");
  const core::Evaluation result = Check(PodWithoutDebug(), policy);
  EXPECT_TRUE(FindingsOf(result, kNcclDebugMissingRule).empty());
  EXPECT_EQ(result.patch, core::Json::array());
}

TEST(NcclDebugMissing, LeavesSingleGpuAndEnvFromContainersAlone) {
  const core::Json notebook = Yaml(R"(
apiVersion: v1
kind: Pod
metadata: {name: notebook, namespace: ml}
spec:
  containers:
    - name: jupyter
      image: jupyter:1.0
      resources: {limits: {nvidia.com/gpu: 1}}
)");
  EXPECT_TRUE(FindingsOf(Check(notebook), kNcclDebugMissingRule).empty());
  core::Json pod = PodWithoutDebug();
  ContainerOf(pod)["envFrom"] = core::Json::array({{{"configMapRef", {{"name", "nccl"}}}}});
  EXPECT_TRUE(FindingsOf(Check(pod), kNcclDebugMissingRule).empty());
}

}  // namespace
}  // namespace ncclguard::test
