#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/policy.h"

namespace ncclguard::test {
namespace {

using core::Level;
using core::ParsePolicy;
using core::Policy;
using core::PolicyError;

TEST(Policy, DefaultsMatchTheRulesContract) {
  const Policy p = Policy::Defaults();
  EXPECT_EQ(p.socket_ifname, "^lo,docker,efa,veth");
  ASSERT_NE(p.FindInstanceType("p4d.24xlarge"), nullptr);
  EXPECT_EQ(p.FindInstanceType("p4d.24xlarge")->efa_devices, 4);
  EXPECT_EQ(p.FindInstanceType("p5.48xlarge")->efa_devices, 32);
  EXPECT_EQ(p.FindInstanceType("p5e.48xlarge")->efa_devices, 32);
  EXPECT_EQ(p.FindInstanceType("p5en.48xlarge")->efa_devices, 16);
  EXPECT_EQ(p.FindInstanceType("p5en.48xlarge")->gpus, 8);
  EXPECT_EQ(p.FindInstanceType("x9.48xlarge"), nullptr);
  EXPECT_FALSE(p.default_instance_type);
  EXPECT_EQ(core::InstanceFamily("p5en.48xlarge"), "p5en");
}

TEST(Policy, NcclPolicyObjectOverridesAndExtends) {
  const Policy p = ParsePolicy(R"(
apiVersion: ncclguard.io/v1alpha1
kind: NcclPolicy
metadata: {name: default}
spec:
  guideBaseURL: https://wiki.example/nccl
  socketIfname: eth0
  defaultInstanceType: p5.48xlarge
  instanceTypes:
    - {name: p6-b200.48xlarge, efaDevices: 8, gpus: 8, gpudirectRdma: true}
    - {name: p5.48xlarge, efaDevices: 30}
  rules:
    image-unpinned: {level: deny}
    collnet-on-efa: {enabled: false}
  gate:
    countUnvalidatedNodes: true
    admitWhenReady: false
  rendezvousPort: 23456
)");
  EXPECT_EQ(p.guide_base_url, "https://wiki.example/nccl");
  EXPECT_EQ(p.socket_ifname, "eth0");
  EXPECT_EQ(p.default_instance_type, "p5.48xlarge");
  EXPECT_EQ(p.FindInstanceType("p6-b200.48xlarge")->efa_devices, 8);
  EXPECT_EQ(p.FindInstanceType("p5.48xlarge")->efa_devices, 30);
  EXPECT_EQ(p.FindInstanceType("p5.48xlarge")->gpus,
            8);  // unspecified fields keep the built-in value
  EXPECT_EQ(p.EffectiveLevel("image-unpinned", Level::Warn), Level::Deny);
  EXPECT_FALSE(p.RuleEnabled("collnet-on-efa"));
  EXPECT_TRUE(p.RuleEnabled("image-unpinned"));
  EXPECT_TRUE(p.gate.count_unvalidated_nodes);
  EXPECT_FALSE(p.gate.admit_when_ready);
  EXPECT_TRUE(core::Policy::Defaults().gate.admit_when_ready);
  EXPECT_EQ(p.rendezvous_port, 23456);
}

TEST(Policy, BareSpecAndEmptyFileAreAccepted) {
  EXPECT_EQ(ParsePolicy("defaultInstanceType: p4d.24xlarge").default_instance_type, "p4d.24xlarge");
  EXPECT_EQ(ParsePolicy("").socket_ifname, Policy::Defaults().socket_ifname);
}

void ExpectPolicyError(const std::string& yaml, const std::string& fragment) {
  try {
    ParsePolicy(yaml);
    ADD_FAILURE() << "accepted: " << yaml;
  } catch (const PolicyError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Policy, RejectsMistakesWithTheFieldNamed) {
  ExpectPolicyError("socketIfnme: eth0", "unknown field \"socketIfnme\"");
  ExpectPolicyError("rules: {no-such-rule: {enabled: false}}", "spec.rules.no-such-rule");
  ExpectPolicyError("rules: {image-unpinned: {level: fix}}", "has no fix");
  ExpectPolicyError("rules: {image-unpinned: {level: loud}}", "not one of fix, warn, deny");
  ExpectPolicyError("instanceTypes: [{name: p5.48xlarge, efaDevices: many}]",
                    "spec.instanceTypes[0].efaDevices");
  ExpectPolicyError("instanceTypes: [{efaDevices: 2}]", "name is required");
  ExpectPolicyError("instanceTypes: {name: x}", "expected a list");
  ExpectPolicyError("rendezvousPort: 70000", "between 1 and 65535");
  ExpectPolicyError("kind: Pod\nspec: {}", "expected NcclPolicy");
  ExpectPolicyError("- a\n- b", "expected a mapping");
  ExpectPolicyError("a: [", "not valid YAML");
}

// Issue 23: yaml-cpp reads text that starts with "," as endless empty documents, and YAML::Load
// returned the first: a policy with no settings, the defaults applied.
TEST(Policy, TextYamlCppCannotReadIsAnErrorNotNoSettings) {
  ExpectPolicyError(",", "not valid YAML: line 1, column 1: no document can be read from here");
  ExpectPolicyError(", rules: {image-unpinned: {enabled: false}}", "not valid YAML");
  // Empty, comments only or null: no settings, as before.
  for (const char* text : {"", "\n\n", "# settings to come\n", "---\n", "~\n", "null"}) {
    EXPECT_EQ(ParsePolicy(text).socket_ifname, Policy::Defaults().socket_ifname) << text;
  }
}

// Issue 23: `fix` wrote a policy's bytes that are not UTF-8 into manifests that `lint` then
// refused, and the webhook answered 500. yaml-cpp passes raw bytes through and decodes "\N" and
// "\_" to the single bytes 0x85 and 0xA0.
TEST(Policy, StringsThatAreNotUtf8AreAnErrorNamingTheField) {
  ExpectPolicyError("socketIfname: eth\xff", "spec.socketIfname: not valid UTF-8");
  ExpectPolicyError("socketIfname: \"eth\\N\"", "spec.socketIfname: not valid UTF-8");
  ExpectPolicyError("clusterDomain: \"cluster\\_local\"", "spec.clusterDomain: not valid UTF-8");
  ExpectPolicyError("guideBaseURL: https://wiki.example/\xc3",
                    "spec.guideBaseURL: not valid UTF-8");
  ExpectPolicyError("defaultInstanceType: p5.\xe2\x82",
                    "spec.defaultInstanceType: not valid UTF-8");
  ExpectPolicyError("instanceTypes: [{name: \"p9.\\N\", gpus: 8}]",
                    "spec.instanceTypes[0].name: not valid UTF-8");
  ExpectPolicyError("rules: {image-unpinned: {level: \"deny\\N\"}}",
                    "spec.rules.image-unpinned.level: not valid UTF-8");
  ExpectPolicyError("kind: \"NcclPolicy\\_\"\nspec: {}", "kind: not valid UTF-8");
  // UTF-8 beyond ASCII is text like any other.
  EXPECT_EQ(ParsePolicy("clusterDomain: \"cl\u00fcster.local\"").cluster_domain,
            "cl\u00fcster.local");
}

}  // namespace
}  // namespace ncclguard::test
