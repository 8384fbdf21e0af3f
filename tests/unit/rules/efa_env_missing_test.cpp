#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kEfaEnvMissingRule = "efa-env-missing";

core::Json Var(const std::string& name, const std::string& value) {
  return core::Json{{"name", name}, {"value", value}};
}

core::Json PodWithout(std::initializer_list<const char*> names) {
  core::Json pod = CompliantPod();
  for (const char* name : names) RemoveEnv(ContainerOf(pod), name);
  return pod;
}

std::string EnvValue(const core::Json& pod, const std::string& name) {
  for (const core::Json& var : pod.at("spec").at("containers").at(0).at("env")) {
    if (var.at("name") == name) return var.at("value").get<std::string>();
  }
  return "<unset>";
}

TEST(EfaEnvMissing, AddsFiEfaUseDeviceRdmaOnP5) {
  const core::Evaluation result = Check(PodWithout({"FI_EFA_USE_DEVICE_RDMA"}));

  const auto findings = FindingsOf(result, kEfaEnvMissingRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  const core::Finding& f = findings.front();
  EXPECT_EQ(f.level, core::Level::Fix);
  EXPECT_EQ(f.path, "/spec/containers/0/env");
  EXPECT_TRUE(Mentions(
      f.message, "container \"pytorch\" uses EFA but its env lacks FI_EFA_USE_DEVICE_RDMA=1."));
  EXPECT_TRUE(Mentions(f.message, "Set them in env"));
  EXPECT_TRUE(LinksTo(f, "efa-config"));

  EXPECT_EQ(
      result.patch,
      core::Json::array({AddOp("/spec/containers/0/env/-", Var("FI_EFA_USE_DEVICE_RDMA", "1"))}));
  EXPECT_EQ(EnvValue(result.fixed, "FI_EFA_USE_DEVICE_RDMA"), "1");
}

TEST(EfaEnvMissing, AddsAllThreeVariablesInOrder) {
  const core::Evaluation result =
      Check(PodWithout({"FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "NCCL_SOCKET_IFNAME"}));

  const auto findings = FindingsOf(result, kEfaEnvMissingRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  EXPECT_TRUE(Mentions(
      findings.front().message,
      "lacks FI_PROVIDER=efa, FI_EFA_USE_DEVICE_RDMA=1, NCCL_SOCKET_IFNAME=^lo,docker,efa,veth."));
  const core::Json expected = core::Json::array({
      AddOp("/spec/containers/0/env/-", Var("FI_PROVIDER", "efa")),
      AddOp("/spec/containers/0/env/-", Var("FI_EFA_USE_DEVICE_RDMA", "1")),
      AddOp("/spec/containers/0/env/-", Var("NCCL_SOCKET_IFNAME", "^lo,docker,efa,veth")),
  });
  EXPECT_EQ(result.patch, expected);
  EXPECT_EQ(RepatchOf(result), core::Json::array());
}

TEST(EfaEnvMissing, CreatesTheEnvListWhenTheContainerHasNone) {
  core::Json pod = CompliantPod();
  ContainerOf(pod).erase("env");
  const core::Policy policy = core::ParsePolicy(
      "rules: {async-error-handling-missing: {enabled: false}, "
      "nccl-debug-missing: {enabled: false}}");
  const core::Evaluation result = Check(pod, policy);
  const core::Json expected = core::Json::array({
      AddOp("/spec/containers/0/env", core::Json::array({Var("FI_PROVIDER", "efa")})),
      AddOp("/spec/containers/0/env/-", Var("FI_EFA_USE_DEVICE_RDMA", "1")),
      AddOp("/spec/containers/0/env/-", Var("NCCL_SOCKET_IFNAME", "^lo,docker,efa,veth")),
  });
  EXPECT_EQ(result.patch, expected) << Dump(result);
  EXPECT_EQ(RepatchOf(result, policy), core::Json::array());
}

TEST(EfaEnvMissing, NeverOverridesAUserFiProvider) {
  const core::Evaluation result = CheckPodEnv("FI_PROVIDER", "tcp");
  EXPECT_TRUE(FindingsOf(result, kEfaEnvMissingRule).empty()) << Dump(result);
  EXPECT_EQ(result.patch, core::Json::array());
  EXPECT_EQ(EnvValue(result.fixed, "FI_PROVIDER"), "tcp");
}

TEST(EfaEnvMissing, KeepsAUserValueWhileAddingTheOthers) {
  core::Json pod = PodWithout({"FI_EFA_USE_DEVICE_RDMA", "NCCL_SOCKET_IFNAME"});
  SetEnv(ContainerOf(pod), "FI_PROVIDER", "tcp");
  const core::Evaluation result = Check(pod);
  EXPECT_EQ(EnvValue(result.fixed, "FI_PROVIDER"), "tcp");
  EXPECT_EQ(EnvValue(result.fixed, "NCCL_SOCKET_IFNAME"), "^lo,docker,efa,veth");
  EXPECT_EQ(result.patch.size(), 2u) << Dump(result);
}

TEST(EfaEnvMissing, UsesThePolicySocketIfname) {
  const core::Policy policy = core::ParsePolicy("socketIfname: eth0");
  const core::Evaluation result = Check(PodWithout({"NCCL_SOCKET_IFNAME"}), policy);
  EXPECT_EQ(
      result.patch,
      core::Json::array({AddOp("/spec/containers/0/env/-", Var("NCCL_SOCKET_IFNAME", "eth0"))}));
}

TEST(EfaEnvMissing, DoesNotAskForRdmaOnAnInstanceTypeWithoutGpudirect) {
  const core::Policy policy = core::ParsePolicy(R"(
instanceTypes:
  - {name: p4de.24xlarge, efaDevices: 4, gpus: 8, gpudirectRdma: false}
)");
  core::Json pod = PodWithout({"FI_EFA_USE_DEVICE_RDMA"});
  SetInstanceType(pod, "p4de.24xlarge");
  SetResource(ContainerOf(pod), kEfaKey, 4);
  const core::Evaluation result = Check(pod, policy);
  EXPECT_TRUE(FindingsOf(result, kEfaEnvMissingRule).empty()) << Dump(result);
  EXPECT_EQ(result.patch, core::Json::array());
}

TEST(EfaEnvMissing, AddsOnlyProviderAndIfnameWhenTheInstanceTypeIsUnknown) {
  core::Json pod = PodWithout({"FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "NCCL_SOCKET_IFNAME"});
  pod["spec"].erase("nodeSelector");  // the explicit EFA request still makes it an EFA container
  const core::Evaluation result = Check(pod);
  const core::Json expected = core::Json::array({
      AddOp("/spec/containers/0/env/-", Var("FI_PROVIDER", "efa")),
      AddOp("/spec/containers/0/env/-", Var("NCCL_SOCKET_IFNAME", "^lo,docker,efa,veth")),
  });
  EXPECT_EQ(result.patch, expected) << Dump(result);
}

TEST(EfaEnvMissing, LeavesAContainerWithEnvFromAlone) {
  core::Json pod = PodWithout({"FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "NCCL_SOCKET_IFNAME"});
  ContainerOf(pod)["envFrom"] = Yaml("list: [{configMapRef: {name: efa-env}}]")["list"];
  const core::Evaluation result = Check(pod);
  EXPECT_TRUE(FindingsOf(result, kEfaEnvMissingRule).empty()) << Dump(result);
  EXPECT_EQ(result.patch, core::Json::array());
}

TEST(EfaEnvMissing, LeavesCpuContainersOfAnEfaPodAlone) {
  core::Json pod = CompliantPod();
  AddCpuSidecar(pod);
  const core::Evaluation result = Check(pod);
  EXPECT_TRUE(FindingsOf(result, kEfaEnvMissingRule).empty()) << Dump(result);
  EXPECT_EQ(result.patch, core::Json::array());
}

// With the EFA fix disabled, nothing will request EFA devices for the container: adding
// FI_PROVIDER=efa then makes fi-provider-without-efa deny the object the fix produced.
TEST(EfaEnvMissing, DoesNotAddFiProviderEfaWhereNoEfaDeviceWillBeRequested) {
  const core::Policy policy = core::ParsePolicy("rules: {efa-resources-missing: {enabled: false}}");
  core::Json pod = PodWithout({"FI_PROVIDER"});
  RemoveResource(ContainerOf(pod), kEfaKey);
  const core::Evaluation result = Check(pod, policy);
  EXPECT_EQ(EnvValue(result.fixed, "FI_PROVIDER"), "<unset>") << Dump(result);
  EXPECT_TRUE(FindingsOf(result, "fi-provider-without-efa").empty()) << Dump(result);
}

TEST(EfaEnvMissing, DoesNotFireOnACompliantPod) {
  EXPECT_TRUE(FindingsOf(Check(CompliantPod()), kEfaEnvMissingRule).empty());
}

}  // namespace
}  // namespace ncclguard::test
