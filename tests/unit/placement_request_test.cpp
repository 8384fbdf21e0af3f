// What ncclguard asks the schedulers for (core/placement_request.h): the level chosen from a
// Topology or the learned catalog, the user's own placement read, the mode per namespace.
#include "core/placement_request.h"

#include <gtest/gtest.h>

#include "core/errors.h"
#include "test_support.h"

namespace ncclguard::test {
namespace {

using core::Json;

const std::string kRequestLayer1 = "topology.k8s.aws/network-node-layer-1";
const std::string kRequestLayer2 = "topology.k8s.aws/network-node-layer-2";
const std::string kRequestLayer3 = "topology.k8s.aws/network-node-layer-3";
const std::string kRequestLayer4 = "topology.k8s.aws/network-node-layer-4";

core::InstanceType TypeWithLevels(int depth, int ultra_nodes = 0) {
  core::InstanceType type;
  type.name = "p6-b200.48xlarge";
  type.efa_devices = 8;
  type.gpus = 8;
  for (int layer = 1; layer <= depth; ++layer) {
    type.topology_levels.push_back("topology.k8s.aws/network-node-layer-" + std::to_string(layer));
  }
  type.ultra_server_nodes = ultra_nodes;
  return type;
}

TEST(PlacementRequest, KueueIsAskedAtTheDeepestNetworkLayerTheTopologyListsAndTheTypeCarries) {
  const std::vector<std::string> four{kRequestLayer1, kRequestLayer2, kRequestLayer3,
                                      kRequestLayer4, "kubernetes.io/hostname"};
  EXPECT_EQ(core::KueueTopologyLevel(four, nullptr, 8), kRequestLayer4);
  const core::InstanceType depth4 = TypeWithLevels(4);
  const core::InstanceType depth3 = TypeWithLevels(3);
  EXPECT_EQ(core::KueueTopologyLevel(four, &depth4, 8), kRequestLayer4);
  EXPECT_EQ(core::KueueTopologyLevel(four, &depth3, 8), kRequestLayer3);
  // Listed in any order, the deepest still wins.
  EXPECT_EQ(core::KueueTopologyLevel({kRequestLayer3, kRequestLayer1}, nullptr, 8), kRequestLayer3);
  EXPECT_EQ(core::KueueTopologyLevel({"kubernetes.io/hostname"}, nullptr, 8), std::nullopt);
  EXPECT_EQ(core::KueueTopologyLevel({}, nullptr, 8), std::nullopt);
}

TEST(PlacementRequest, AnUltraServerIsAskedForOnlyWhenTheJobFitsOne) {
  const std::vector<std::string> levels{kRequestLayer1, kRequestLayer2, kRequestLayer3,
                                        std::string(core::kUltraServerLabel),
                                        "kubernetes.io/hostname"};
  const core::InstanceType ultra = TypeWithLevels(3, 18);
  EXPECT_EQ(core::KueueTopologyLevel(levels, &ultra, 18), core::kUltraServerLabel);
  EXPECT_EQ(core::KueueTopologyLevel(levels, &ultra, 19), kRequestLayer3);
  const core::InstanceType plain = TypeWithLevels(3);
  EXPECT_EQ(core::KueueTopologyLevel(levels, &plain, 4), kRequestLayer3);
  core::Policy policy = core::Policy::Defaults();
  EXPECT_EQ(core::AffinityTopologyLevel(policy, &ultra, 9), core::kUltraServerLabel);
  EXPECT_EQ(core::AffinityTopologyLevel(policy, &ultra, 20), kRequestLayer3);
}

TEST(PlacementRequest, TheAffinityLevelOfAnUnknownTypeIsTheOneEveryLabelledTypeAgreesOn) {
  core::Policy policy = core::Policy::Defaults();
  EXPECT_EQ(core::AffinityTopologyLevel(policy, nullptr, 4), std::nullopt);
  core::ObservedInstanceType p5 = ObservedType("p5.48xlarge", 8, 32, 2);
  p5.topology_levels = {kRequestLayer1, kRequestLayer2, kRequestLayer3};
  policy.Learn({p5});
  EXPECT_EQ(core::AffinityTopologyLevel(policy, nullptr, 4), kRequestLayer3);
  EXPECT_EQ(core::AffinityTopologyLevel(policy, policy.FindInstanceType("p5.48xlarge"), 4),
            kRequestLayer3);
  // A type the nodes show without layers: nothing to ask on.
  EXPECT_EQ(core::AffinityTopologyLevel(policy, policy.FindInstanceType("p4d.24xlarge"), 4),
            std::nullopt);
  core::ObservedInstanceType b200 = ObservedType("p6-b200.48xlarge", 8, 8, 0);
  b200.topology_levels = {kRequestLayer1, kRequestLayer2, kRequestLayer3, kRequestLayer4};
  policy.Learn({p5, b200});
  EXPECT_EQ(core::AffinityTopologyLevel(policy, nullptr, 4), std::nullopt);
  EXPECT_EQ(core::AffinityTopologyLevel(policy, policy.FindInstanceType("p6-b200.48xlarge"), 4),
            kRequestLayer4);
}

TEST(PlacementRequest, ThePodsOwnPlacementIsReadFromAffinitySpreadAndTopologySelectors) {
  EXPECT_FALSE(core::HasOwnPlacement(Json::object()));
  EXPECT_FALSE(core::HasOwnPlacement(Yaml("nodeSelector: {node.kubernetes.io/instance-type: x}")));
  EXPECT_FALSE(core::HasOwnPlacement(Yaml("affinity: {podAffinity: {}}")));
  EXPECT_FALSE(core::HasOwnPlacement(Yaml("topologySpreadConstraints: []")));
  EXPECT_TRUE(core::HasOwnPlacement(
      Yaml("affinity: {podAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{}]}}")));
  EXPECT_TRUE(core::HasOwnPlacement(Yaml("affinity: {podAntiAffinity: {x: 1}}")));
  EXPECT_TRUE(core::HasOwnPlacement(Yaml("topologySpreadConstraints: [{maxSkew: 1}]")));
  EXPECT_TRUE(core::HasOwnPlacement(Yaml("nodeSelector: {topology.k8s.aws/ultraserver-id: u1}")));
  EXPECT_TRUE(core::HasOwnPlacement(Yaml(R"(
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions: [{key: topology.k8s.aws/network-node-layer-2, operator: In, values: [a]}]
)")));
  EXPECT_TRUE(core::HasOwnPlacement(Yaml(R"(
affinity:
  nodeAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 1
        preference:
          matchExpressions: [{key: topology.k8s.aws/network-node-layer-3, operator: In, values: [a]}]
)")));
  EXPECT_FALSE(core::HasOwnPlacement(Yaml(R"(
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions: [{key: node.kubernetes.io/instance-type, operator: In, values: [a]}]
)")));
}

TEST(PlacementRequest, KueuesTopologyRequestsAreTheUsersChoice) {
  EXPECT_FALSE(core::HasKueueTopologyRequest(nullptr));
  const Json other = Yaml("annotations: {team: ml}");
  EXPECT_FALSE(core::HasKueueTopologyRequest(&other));
  for (const std::string_view key : core::kKueueTopologyAnnotations) {
    const Json metadata{{"annotations", {{std::string(key), "x"}}}};
    EXPECT_TRUE(core::HasKueueTopologyRequest(&metadata)) << key;
  }
}

TEST(PlacementRequest, TheModeIsThePolicysUnlessTheNamespaceLabelNamesOne) {
  EXPECT_EQ(core::PlacementModeIn(core::PlacementMode::Preferred, nullptr),
            core::PlacementMode::Preferred);
  const Json labels{{"ncclguard.io/placement", "off"}};
  EXPECT_EQ(core::PlacementModeIn(core::PlacementMode::Required, &labels),
            core::PlacementMode::Off);
  const Json bad{{"ncclguard.io/placement", "sometimes"}};
  EXPECT_EQ(core::PlacementModeIn(core::PlacementMode::Required, &bad),
            core::PlacementMode::Required);
  for (const auto mode :
       {core::PlacementMode::Preferred, core::PlacementMode::Required, core::PlacementMode::Off}) {
    EXPECT_EQ(core::ParsePlacementMode(core::PlacementModeName(mode)), mode);
  }
}

TEST(PlacementRequest, ThePolicyReadsSpecPlacementAndRefusesAnythingElse) {
  EXPECT_EQ(core::Policy::Defaults().placement, core::PlacementMode::Preferred);
  EXPECT_EQ(core::ParsePolicy("spec: {placement: required}").placement,
            core::PlacementMode::Required);
  EXPECT_EQ(core::ParsePolicy("spec: {placement: \"off\"}").placement, core::PlacementMode::Off);
  try {
    core::ParsePolicy("spec: {placement: sometimes}");
    FAIL() << "accepted";
  } catch (const core::PolicyError& e) {
    EXPECT_EQ(std::string(e.what()),
              "spec.placement: expected preferred, required or off, got \"sometimes\"");
  }
}

TEST(PlacementRequest, TheLearnedCatalogCarriesTheLevelsAndTheUltraServerSize) {
  core::ObservedInstanceType seen = ObservedType("p6e-gb200.36xlarge", 4, 8, 0);
  seen.topology_levels = {kRequestLayer1, kRequestLayer2, kRequestLayer3};
  seen.ultra_server = true;
  seen.ultra_server_nodes = 18;
  const std::vector<core::ObservedInstanceType> again =
      core::ParseObservedCatalog(core::ObservedCatalogJson({seen}));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].ultra_server_nodes, 18);
  core::Policy policy = core::Policy::Defaults();
  policy.Learn(again);
  const core::InstanceType* type = policy.FindInstanceType("p6e-gb200.36xlarge");
  ASSERT_NE(type, nullptr);
  EXPECT_EQ(type->topology_levels, seen.topology_levels);
  EXPECT_EQ(type->ultra_server_nodes, 18);
}

TEST(PlacementRequest, TheAffinityTermSelectsTheJobsPodsOnTheLevel) {
  EXPECT_EQ(core::JobAffinityTerm("jobset.sigs.k8s.io/jobset-name", "train", kRequestLayer3),
            Json::parse(R"({"labelSelector": {"matchLabels": {"jobset.sigs.k8s.io/jobset-name":
                "train"}}, "topologyKey": "topology.k8s.aws/network-node-layer-3"})"));
}

}  // namespace
}  // namespace ncclguard::test

namespace ncclguard::test {
namespace {

// Past the bounds: a pod spec of 100,000 nodeSelector keys and one of 10,000 node affinity terms
// of 10 expressions each are read once each (a linear walk), the answer right, nothing thrown.
TEST(PlacementRequest, AHugePodSpecIsReadOnceAndAnsweredRight) {
  // Appended as a reader would (ordered_json's operator[] searches the keys: quadratic to build).
  core::Json selector = core::Json::object();
  auto& members = selector.get_ref<core::Json::object_t&>();
  members.reserve(100'001);
  for (int i = 0; i < 100'000; ++i)
    members.emplace_back("example.com/key-" + std::to_string(i), "v");
  EXPECT_FALSE(core::HasOwnPlacement(core::Json{{"nodeSelector", selector}}));
  selector["topology.k8s.aws/network-node-layer-3"] = "nn-a";
  EXPECT_TRUE(core::HasOwnPlacement(core::Json{{"nodeSelector", selector}}));

  core::Json terms = core::Json::array();
  for (int t = 0; t < 10'000; ++t) {
    core::Json expressions = core::Json::array();
    for (int e = 0; e < 10; ++e) {
      expressions.push_back({{"key", "example.com/k" + std::to_string(e)}, {"operator", "Exists"}});
    }
    terms.push_back({{"matchExpressions", std::move(expressions)}});
  }
  core::Json spec{
      {"affinity",
       {{"nodeAffinity",
         {{"requiredDuringSchedulingIgnoredDuringExecution", {{"nodeSelectorTerms", terms}}}}}}}};
  EXPECT_FALSE(core::HasOwnPlacement(spec));
  spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
      ["nodeSelectorTerms"][9'999]["matchExpressions"][9]["key"] =
          "topology.k8s.aws/ultraserver-id";
  EXPECT_TRUE(core::HasOwnPlacement(spec));
}

}  // namespace
}  // namespace ncclguard::test
