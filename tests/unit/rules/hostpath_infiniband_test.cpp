#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kHostpathInfinibandRule = "hostpath-infiniband";

// The compliant pod with a second volume (index 1) mounting `path` from the host.
core::Json PodWithHostPath(const std::string& path) {
  core::Json pod = CompliantPod();
  pod["spec"]["volumes"].push_back(core::Json{{"name", "host"}, {"hostPath", {{"path", path}}}});
  return pod;
}

TEST(HostPathInfiniband, DeniesDevInfinibandWithATrailingSlash) {
  const core::Evaluation result = Check(PodWithHostPath("/dev/infiniband/"));

  const auto findings = FindingsOf(result, kHostpathInfinibandRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  const core::Finding& f = findings.front();
  EXPECT_EQ(f.level, core::Level::Deny);
  EXPECT_EQ(f.path, "/spec/volumes/1/hostPath");
  EXPECT_TRUE(Mentions(f.message, "hostPath /dev/infiniband:"));
  EXPECT_TRUE(Mentions(f.message, "Remove this volume and request vpc.amazonaws.com/efa"));
  EXPECT_TRUE(LinksTo(f, "efa-tcp-fallback"));
  EXPECT_TRUE(result.HasDeny());
}

TEST(HostPathInfiniband, DeniesTheExactPath) {
  EXPECT_EQ(FindingsOf(Check(PodWithHostPath("/dev/infiniband")), kHostpathInfinibandRule).size(),
            1u);
}

TEST(HostPathInfiniband, DeniesADeviceUnderDevInfiniband) {
  const auto findings =
      FindingsOf(Check(PodWithHostPath("/dev/infiniband/uverbs0")), kHostpathInfinibandRule);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_TRUE(Mentions(findings.front().message, "/dev/infiniband/uverbs0"));
}

TEST(HostPathInfiniband, DeniesItInAJobTemplate) {
  const core::Evaluation result = Check(Yaml(R"(
apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  template:
    spec:
      containers: [{name: main, image: busybox:1.36}]
      volumes:
        - name: ib
          hostPath: {path: /dev/infiniband}
)"));
  const auto findings = FindingsOf(result, kHostpathInfinibandRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  EXPECT_EQ(findings.front().path, "/spec/template/spec/volumes/0/hostPath");
}

TEST(HostPathInfiniband, AllowsOtherHostPaths) {
  EXPECT_TRUE(
      FindingsOf(Check(PodWithHostPath("/dev/infinibandx")), kHostpathInfinibandRule).empty());
  EXPECT_TRUE(FindingsOf(Check(PodWithHostPath("/dev")), kHostpathInfinibandRule).empty());
  EXPECT_TRUE(FindingsOf(Check(PodWithHostPath("/var/log")), kHostpathInfinibandRule).empty());
}

TEST(HostPathInfiniband, DoesNotFireOnACompliantPod) {
  EXPECT_TRUE(FindingsOf(Check(CompliantPod()), kHostpathInfinibandRule).empty());
}

}  // namespace
}  // namespace ncclguard::test
