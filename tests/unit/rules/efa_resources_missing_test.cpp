#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kEfaResourcesMissingRule = "efa-resources-missing";
constexpr const char* kRequestsEfa = "/spec/containers/0/resources/requests/vpc.amazonaws.com~1efa";
constexpr const char* kLimitsEfa = "/spec/containers/0/resources/limits/vpc.amazonaws.com~1efa";

// The compliant pod on `instance_type` with `gpus` GPUs and no EFA request.
core::Json PodWithoutEfa(const std::string& instance_type = "p5.48xlarge", int gpus = 8) {
  core::Json pod = CompliantPod();
  SetInstanceType(pod, instance_type);
  SetResource(ContainerOf(pod), kGpuKey, gpus);
  RemoveResource(ContainerOf(pod), kEfaKey);
  return pod;
}

// Without a nodeSelector, the instance type comes from the policy or node affinity, if at all.
core::Json PodWithoutEfaOrNodeSelector() {
  core::Json pod = PodWithoutEfa();
  pod["spec"].erase("nodeSelector");
  return pod;
}

TEST(EfaResourcesMissing, AddsThirtyTwoEfaToEightGpuContainerOnP5) {
  const core::Evaluation result = Check(PodWithoutEfa());

  const auto findings = FindingsOf(result, kEfaResourcesMissingRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  const core::Finding& f = findings.front();
  EXPECT_EQ(f.level, core::Level::Fix);
  EXPECT_EQ(f.path, "/spec/containers/0/resources");
  EXPECT_TRUE(Mentions(f.message, "container \"pytorch\""));
  EXPECT_TRUE(Mentions(f.message, "p5.48xlarge"));
  EXPECT_TRUE(Mentions(f.message, "Add vpc.amazonaws.com/efa: 32 to its requests and limits"));
  EXPECT_TRUE(LinksTo(f, "efa-tcp-fallback"));

  const core::Json expected =
      core::Json::array({AddOp(kRequestsEfa, "32"), AddOp(kLimitsEfa, "32")});
  EXPECT_EQ(result.patch, expected);
  EXPECT_EQ(result.fixed.at(core::JsonPointer(kRequestsEfa)), "32");
  EXPECT_EQ(result.fixed.at(core::JsonPointer(kLimitsEfa)), "32");
  EXPECT_FALSE(result.HasDeny()) << Dump(result);
}

TEST(EfaResourcesMissing, FixIsIdempotent) {
  const core::Evaluation result = Check(PodWithoutEfa());
  ASSERT_FALSE(result.patch.empty());
  EXPECT_EQ(RepatchOf(result), core::Json::array());
  EXPECT_TRUE(FindingsOf(Check(result.fixed), kEfaResourcesMissingRule).empty());
}

TEST(EfaResourcesMissing, RoundsUpToOneEfaForOneGpuOnP4d) {
  const core::Evaluation result = Check(PodWithoutEfa("p4d.24xlarge", 1));
  ASSERT_EQ(FindingsOf(result, kEfaResourcesMissingRule).size(), 1u) << Dump(result);
  EXPECT_EQ(result.patch, core::Json::array({AddOp(kRequestsEfa, "1"), AddOp(kLimitsEfa, "1")}));
  EXPECT_TRUE(FindingsOf(result, "efa-count-mismatch").empty()) << Dump(result);
}

TEST(EfaResourcesMissing, AddsSixteenEfaForFourGpusOnP5) {
  const core::Evaluation result = Check(PodWithoutEfa("p5.48xlarge", 4));
  EXPECT_EQ(result.patch, core::Json::array({AddOp(kRequestsEfa, "16"), AddOp(kLimitsEfa, "16")}));
}

TEST(EfaResourcesMissing, AddsSixteenEfaForEightGpusOnP5en) {
  const core::Evaluation result = Check(PodWithoutEfa("p5en.48xlarge", 8));
  EXPECT_EQ(result.patch, core::Json::array({AddOp(kRequestsEfa, "16"), AddOp(kLimitsEfa, "16")}));
}

TEST(EfaResourcesMissing, CreatesTheRequestsMapWhenOnlyLimitsAreSet) {
  core::Json pod = PodWithoutEfa();
  ContainerOf(pod)["resources"].erase("requests");
  const core::Evaluation result = Check(pod);
  const core::Json expected = core::Json::array(
      {AddOp("/spec/containers/0/resources/requests", core::Json{{kEfaKey, "32"}}),
       AddOp(kLimitsEfa, "32")});
  EXPECT_EQ(result.patch, expected) << Dump(result);
}

TEST(EfaResourcesMissing, NeverOverridesAnExplicitCountAndEfaCountMismatchDeniesIt) {
  core::Json pod = CompliantPod();
  SetResource(ContainerOf(pod), kEfaKey, 16);
  const core::Evaluation result = Check(pod);

  EXPECT_TRUE(FindingsOf(result, kEfaResourcesMissingRule).empty()) << Dump(result);
  EXPECT_EQ(result.patch, core::Json::array());
  EXPECT_EQ(result.fixed.at(core::JsonPointer(kRequestsEfa)), 16);
  EXPECT_EQ(FindingsOf(result, "efa-count-mismatch").size(), 1u) << Dump(result);
  EXPECT_TRUE(result.HasDeny());
}

TEST(EfaResourcesMissing, LeavesAnExplicitZeroForEfaCountMismatchToDeny) {
  core::Json pod = CompliantPod();
  SetResource(ContainerOf(pod), kEfaKey, 0);
  const core::Evaluation result = Check(pod);
  EXPECT_TRUE(FindingsOf(result, kEfaResourcesMissingRule).empty()) << Dump(result);
  EXPECT_EQ(result.fixed.at(core::JsonPointer(kLimitsEfa)), 0);
  EXPECT_EQ(FindingsOf(result, "efa-count-mismatch").size(), 1u) << Dump(result);
}

TEST(EfaResourcesMissing, DoesNotFixWithoutInstanceTypeAndInstanceTypeUnknownWarns) {
  core::Json pod = PodWithoutEfaOrNodeSelector();
  const core::Evaluation result = Check(pod);

  EXPECT_TRUE(FindingsOf(result, kEfaResourcesMissingRule).empty()) << Dump(result);
  EXPECT_FALSE(result.fixed.contains(core::JsonPointer(kRequestsEfa)));
  const auto unknown = FindingsOf(result, "instance-type-unknown");
  ASSERT_EQ(unknown.size(), 1u) << Dump(result);
  EXPECT_EQ(unknown.front().level, core::Level::Warn);
}

TEST(EfaResourcesMissing, DoesNotFixOnAnInstanceTypeOutsideTheCatalog) {
  const core::Evaluation result = Check(PodWithoutEfa("x9.48xlarge", 8));
  EXPECT_TRUE(FindingsOf(result, kEfaResourcesMissingRule).empty()) << Dump(result);
  EXPECT_FALSE(result.fixed.contains(core::JsonPointer(kRequestsEfa)));
}

TEST(EfaResourcesMissing, UsesThePolicyDefaultInstanceType) {
  core::Json pod = PodWithoutEfaOrNodeSelector();
  const core::Policy policy = core::ParsePolicy("defaultInstanceType: p5.48xlarge");
  const core::Evaluation result = Check(pod, policy);

  EXPECT_EQ(FindingsOf(result, kEfaResourcesMissingRule).size(), 1u) << Dump(result);
  EXPECT_EQ(result.patch, core::Json::array({AddOp(kRequestsEfa, "32"), AddOp(kLimitsEfa, "32")}));
  EXPECT_TRUE(FindingsOf(result, "instance-type-unknown").empty()) << Dump(result);
}

TEST(EfaResourcesMissing, UsesAnInstanceTypeAddedByThePolicy) {
  const core::Policy policy = core::ParsePolicy(R"(
instanceTypes:
  - name: p4de.24xlarge
    efaDevices: 4
    gpus: 8
)");
  const core::Evaluation result = Check(PodWithoutEfa("p4de.24xlarge", 8), policy);
  EXPECT_EQ(result.patch, core::Json::array({AddOp(kRequestsEfa, "4"), AddOp(kLimitsEfa, "4")}));
}

TEST(EfaResourcesMissing, ReadsTheInstanceTypeFromRequiredNodeAffinityWithOneValue) {
  core::Json pod = PodWithoutEfaOrNodeSelector();
  pod["spec"]["affinity"] = RequiredNodeAffinity(R"(
      - matchExpressions:
          - {key: node.kubernetes.io/instance-type, operator: In, values: [p5.48xlarge]}
)");
  const core::Evaluation result = Check(pod);

  EXPECT_EQ(FindingsOf(result, kEfaResourcesMissingRule).size(), 1u) << Dump(result);
  EXPECT_EQ(result.patch, core::Json::array({AddOp(kRequestsEfa, "32"), AddOp(kLimitsEfa, "32")}));
}

TEST(EfaResourcesMissing, DoesNotGuessBetweenTwoNodeAffinityValues) {
  core::Json pod = PodWithoutEfaOrNodeSelector();
  pod["spec"]["affinity"] = RequiredNodeAffinity(R"(
      - matchExpressions:
          - {key: node.kubernetes.io/instance-type, operator: In, values: [p5.48xlarge, p4d.24xlarge]}
)");
  const core::Evaluation result = Check(pod);

  EXPECT_TRUE(FindingsOf(result, kEfaResourcesMissingRule).empty()) << Dump(result);
  EXPECT_FALSE(result.fixed.contains(core::JsonPointer(kRequestsEfa)));
  EXPECT_EQ(FindingsOf(result, "instance-type-unknown").size(), 1u) << Dump(result);
}

TEST(EfaResourcesMissing, LeavesCpuContainersOnAnEfaInstanceAlone) {
  core::Json pod = CompliantPod();
  AddCpuSidecar(pod)["resources"] = core::Json::object();
  const core::Evaluation result = Check(pod);
  EXPECT_TRUE(FindingsOf(result, kEfaResourcesMissingRule).empty()) << Dump(result);
  EXPECT_EQ(result.patch, core::Json::array());
}

TEST(EfaResourcesMissing, DoesNotFireOnACompliantPod) {
  const core::Evaluation result = Check(CompliantPod());
  EXPECT_TRUE(FindingsOf(result, kEfaResourcesMissingRule).empty()) << Dump(result);
  EXPECT_EQ(result.patch, core::Json::array());
}

}  // namespace
}  // namespace ncclguard::test
