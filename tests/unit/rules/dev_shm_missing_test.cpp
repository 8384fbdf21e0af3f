#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kDevShmMissingRule = "dev-shm-missing";

const core::Json kVolume = {{"name", "ncclguard-dshm"}, {"emptyDir", {{"medium", "Memory"}}}};
const core::Json kMount = {{"name", "ncclguard-dshm"}, {"mountPath", "/dev/shm"}};

core::Json PodWithoutShm() {
  core::Json pod = CompliantPod();
  pod["spec"].erase("volumes");
  ContainerOf(pod).erase("volumeMounts");
  return pod;
}

// Two compliant 4-GPU containers (16 EFA each) with no /dev/shm and no volumes.
core::Json TwoGpuContainersWithoutShm() {
  core::Json pod = PodWithoutShm();
  SetResource(ContainerOf(pod), kGpuKey, 4);
  SetResource(ContainerOf(pod), kEfaKey, 16);
  core::Json second = ContainerOf(pod);
  second["name"] = "trainer-b";
  pod["spec"]["containers"].push_back(second);
  return pod;
}

TEST(DevShmMissing, AddsOneVolumeAndAMountPerGpuContainer) {
  const core::Evaluation result = Check(TwoGpuContainersWithoutShm());

  const auto findings = FindingsOf(result, kDevShmMissingRule);
  ASSERT_EQ(findings.size(), 2u) << Dump(result);
  EXPECT_EQ(findings[0].level, core::Level::Fix);
  EXPECT_EQ(findings[0].path, "/spec/containers/0/volumeMounts");
  EXPECT_EQ(findings[1].path, "/spec/containers/1/volumeMounts");
  EXPECT_TRUE(Mentions(findings[0].message, "container \"pytorch\" has no volume at /dev/shm"));
  EXPECT_TRUE(Mentions(findings[1].message, "container \"trainer-b\" has no volume at /dev/shm"));
  EXPECT_TRUE(Mentions(findings[0].message, "Mount an emptyDir with medium: Memory at /dev/shm."));
  EXPECT_TRUE(LinksTo(findings[0], "stale-shm"));

  const core::Json expected = core::Json::array({
      AddOp("/spec/volumes", core::Json::array({kVolume})),
      AddOp("/spec/containers/0/volumeMounts", core::Json::array({kMount})),
      AddOp("/spec/containers/1/volumeMounts", core::Json::array({kMount})),
  });
  EXPECT_EQ(result.patch, expected);
  EXPECT_EQ(result.fixed.at(core::JsonPointer("/spec/volumes")), core::Json::array({kVolume}));
  EXPECT_FALSE(result.HasDeny()) << Dump(result);
}

TEST(DevShmMissing, FixIsIdempotent) {
  const core::Evaluation result = Check(TwoGpuContainersWithoutShm());
  ASSERT_FALSE(result.patch.empty());
  EXPECT_EQ(RepatchOf(result), core::Json::array());
}

TEST(DevShmMissing, AppendsToExistingVolumesAndMounts) {
  core::Json pod = PodWithoutShm();
  pod["spec"]["volumes"] =
      core::Json::array({{{"name", "data"}, {"emptyDir", core::Json::object()}}});
  ContainerOf(pod)["volumeMounts"] =
      core::Json::array({{{"name", "data"}, {"mountPath", "/data"}}});
  const core::Evaluation result = Check(pod);
  const core::Json expected = core::Json::array({
      AddOp("/spec/volumes/-", kVolume),
      AddOp("/spec/containers/0/volumeMounts/-", kMount),
  });
  EXPECT_EQ(result.patch, expected) << Dump(result);
}

TEST(DevShmMissing, MountsAnExistingNcclguardVolumeWithoutAddingAnother) {
  core::Json pod = PodWithoutShm();
  pod["spec"]["volumes"] = core::Json::array({kVolume});
  const core::Evaluation result = Check(pod);
  EXPECT_EQ(
      result.patch,
      core::Json::array({AddOp("/spec/containers/0/volumeMounts", core::Json::array({kMount}))}));
}

TEST(DevShmMissing, AcceptsAnExistingMountWithATrailingSlash) {
  core::Json pod = CompliantPod();
  ContainerOf(pod)["volumeMounts"][0]["mountPath"] = "/dev/shm/";
  const core::Evaluation result = Check(pod);
  EXPECT_TRUE(FindingsOf(result, kDevShmMissingRule).empty()) << Dump(result);
  EXPECT_EQ(result.patch, core::Json::array());
}

TEST(DevShmMissing, LeavesCpuContainersAlone) {
  core::Json pod = CompliantPod();
  AddCpuSidecar(pod);
  const core::Evaluation result = Check(pod);
  EXPECT_TRUE(FindingsOf(result, kDevShmMissingRule).empty()) << Dump(result);
  EXPECT_EQ(result.patch, core::Json::array());
}

TEST(DevShmMissing, DoesNotFireOnACompliantPod) {
  EXPECT_TRUE(FindingsOf(Check(CompliantPod()), kDevShmMissingRule).empty());
}

}  // namespace
}  // namespace ncclguard::test
