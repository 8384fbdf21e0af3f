#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kMemoryLimitMissingRule = "memory-limit-missing";

TEST(MemoryLimitMissing, WarnsForAGpuContainerWithOnlyAMemoryRequest) {
  core::Json pod = CompliantPod();
  ContainerOf(pod)["resources"]["limits"].erase("memory");
  const core::Evaluation result = Check(pod);

  const auto findings = FindingsOf(result, kMemoryLimitMissingRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  const core::Finding& f = findings.front();
  EXPECT_EQ(f.level, core::Level::Warn);
  EXPECT_EQ(f.path, "/spec/containers/0/resources");
  EXPECT_TRUE(Mentions(f.message, "container \"pytorch\" has no memory limit"));
  EXPECT_TRUE(Mentions(f.message, "Set resources.limits.memory."));
  EXPECT_TRUE(LinksTo(f, "container-oom"));
  EXPECT_EQ(result.patch, core::Json::array());
}

TEST(MemoryLimitMissing, WarnsForAGpuContainerWithGpusOnlyInRequests) {
  const core::Evaluation result = Check(Yaml(R"(
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - name: main
      image: train:1.0
      resources: {requests: {nvidia.com/gpu: 1}}
)"));
  EXPECT_EQ(FindingsOf(result, kMemoryLimitMissingRule).size(), 1u) << Dump(result);
}

TEST(MemoryLimitMissing, IgnoresCpuContainers) {
  core::Json pod = CompliantPod();
  AddCpuSidecar(pod);
  EXPECT_TRUE(FindingsOf(Check(pod), kMemoryLimitMissingRule).empty());
}

TEST(MemoryLimitMissing, DoesNotFireOnACompliantPod) {
  EXPECT_TRUE(FindingsOf(Check(CompliantPod()), kMemoryLimitMissingRule).empty());
}

}  // namespace
}  // namespace ncclguard::test
