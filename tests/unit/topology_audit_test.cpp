// The admin warnings of the topology labels (core/topology_audit.h): nodes missing a level of
// their type, one TAS flavor over nodes of different depths, a Topology level no node carries, a
// Topology that does not exist; bounded over many nodes. The audit's output of them is in
// cluster_audit_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/topology.h"
#include "core/topology_audit.h"

namespace ncclguard::test {
namespace {

using core::Json;
using core::TopologyAudit;
using core::TopologyWarning;

// A GPU node of `type` labelled with network-node-layer-1 to -`depth` (0: none).
Json TopoAuditNode(const std::string& name, const std::string& type, int depth,
                   const std::string& pool = "gpu") {
  Json labels = {
      {"kubernetes.io/hostname", name}, {"node.kubernetes.io/instance-type", type}, {"pool", pool}};
  for (int layer = 1; layer <= depth; ++layer) {
    labels[core::NetworkLayerLabel(layer)] = "nn-" + std::to_string(layer);
  }
  return {{"metadata", {{"name", name}, {"labels", labels}}}};
}

Json TopoAuditFlavor(const std::string& name, const std::string& topology,
                     const std::string& pool = "gpu") {
  return {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
          {"kind", "ResourceFlavor"},
          {"metadata", {{"name", name}}},
          {"spec", {{"nodeLabels", {{"pool", pool}}}, {"topologyName", topology}}}};
}

// A Topology of network-node-layer-1 to -`depth`, then kubernetes.io/hostname.
Json TopoAuditTopology(const std::string& name, int depth) {
  Json levels = Json::array();
  for (int layer = 1; layer <= depth; ++layer) {
    levels.push_back({{"nodeLabel", core::NetworkLayerLabel(layer)}});
  }
  levels.push_back({{"nodeLabel", "kubernetes.io/hostname"}});
  return {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
          {"kind", "Topology"},
          {"metadata", {{"name", name}}},
          {"spec", {{"levels", levels}}}};
}

std::vector<std::string> TopoAuditReasons(const std::vector<TopologyWarning>& warnings) {
  std::vector<std::string> reasons;
  for (const TopologyWarning& warning : warnings) reasons.push_back(warning.reason);
  return reasons;
}

// The Topology "aws" of `depth` layers, the TAS flavor "gpu" (of `topology`, over `pool`), then
// `nodes`.
TopologyAudit TopoAuditOfGpuFlavor(int depth, const std::vector<Json>& nodes,
                                   const std::string& topology = "aws",
                                   const std::string& pool = "gpu") {
  TopologyAudit audit;
  audit.AddTopology(TopoAuditTopology("aws", depth));
  audit.AddResourceFlavor(TopoAuditFlavor("gpu", topology, pool));
  for (const Json& node : nodes) audit.AddNode(node);
  return audit;
}

// The one warning `audit` has (an empty one, and a failure, when it has another count).
TopologyWarning TopoAuditOnlyWarning(const TopologyAudit& audit) {
  const std::vector<TopologyWarning> warnings = audit.Warnings();
  EXPECT_EQ(warnings.size(), 1u) << ::testing::PrintToString(TopoAuditReasons(warnings));
  return warnings.size() == 1 ? warnings.front() : TopologyWarning{};
}

TEST(TopologyAudit, ACleanClusterHasNoWarning) {
  TopologyAudit audit;
  audit.AddTopology(TopoAuditTopology("aws", 3));
  audit.AddResourceFlavor(TopoAuditFlavor("p5", "aws"));
  audit.AddResourceFlavor(Json{{"metadata", {{"name", "cpu"}}}, {"spec", Json::object()}});
  for (int i = 0; i < 4; ++i)
    audit.AddNode(TopoAuditNode("p5-" + std::to_string(i), "p5.48xlarge", 3));
  // Nodes of a type AWS does not label, outside the flavor.
  audit.AddNode(TopoAuditNode("cpu-0", "m5.large", 0, "cpu"));
  EXPECT_TRUE(audit.Warnings().empty());
  EXPECT_TRUE(TopologyAudit().Warnings().empty());
}

// The one warning of p5 nodes node-a, node-b... labelled to these depths (no Kueue objects).
TopologyWarning TopoAuditOfP5Nodes(const std::vector<int>& depths) {
  TopologyAudit audit;
  char name = 'a';
  for (const int depth : depths) {
    audit.AddNode(TopoAuditNode(std::string("node-") + name++, "p5.48xlarge", depth));
  }
  return TopoAuditOnlyWarning(audit);
}

TEST(TopologyAudit, ANodeMissingALevelOfItsTypeIsNamed) {
  const TopologyWarning warning = TopoAuditOfP5Nodes({3, 2, 3});
  EXPECT_EQ(warning.reason, "NodeMissingTopologyLevel");
  EXPECT_EQ(warning.message,
            "1 p5.48xlarge node lacks topology.k8s.aws/network-node-layer-3, which other "
            "p5.48xlarge nodes carry (node-b): Kueue's topology-aware scheduling leaves it out of "
            "a Topology's capacity");
}

TEST(TopologyAudit, NodesLackingDifferentLevelsAreOneWarningOfTheirType) {
  const TopologyWarning warning = TopoAuditOfP5Nodes({3, 2, 0});
  EXPECT_NE(warning.message.find(
                "2 p5.48xlarge nodes lack one or more of topology.k8s.aws/network-node-layer-1, "
                "topology.k8s.aws/network-node-layer-2, topology.k8s.aws/network-node-layer-3"),
            std::string::npos)
      << warning.message;
  EXPECT_NE(warning.message.find("(node-b, node-c)"), std::string::npos);
  EXPECT_NE(warning.message.find("leaves them out"), std::string::npos);
}

TEST(TopologyAudit, OneFlavorOverDepthThreeAndFourNodesIsMixed) {
  const TopologyWarning warning = TopoAuditOnlyWarning(TopoAuditOfGpuFlavor(
      3, {TopoAuditNode("p5-a", "p5.48xlarge", 3), TopoAuditNode("p5-b", "p5.48xlarge", 3),
          TopoAuditNode("b200-a", "p6-b200.48xlarge", 4),
          // Another flavor's nodes are not its.
          TopoAuditNode("other", "p4d.24xlarge", 2, "other")}));
  EXPECT_EQ(warning.reason, "MixedTopologyDepths");
  EXPECT_EQ(warning.message,
            "ResourceFlavor gpu's nodes end at different network-node-layer depths: "
            "network-node-layer-3 on 2 nodes (p5.48xlarge: p5-a, p5-b); network-node-layer-4 on 1 "
            "node (p6-b200.48xlarge: b200-a): its Topology aws cannot fit every depth (naming a "
            "deeper level leaves the shallower nodes out of Kueue's topology-aware scheduling, not "
            "naming it leaves the deeper nodes' closest blocks unused); give each "
            "depth its own ResourceFlavor and Topology");
}

TEST(TopologyAudit, ATopologyLevelNoNodeOfTheFlavorCarriesIsNamed) {
  const TopologyWarning warning = TopoAuditOnlyWarning(TopoAuditOfGpuFlavor(
      4, {TopoAuditNode("p5-a", "p5.48xlarge", 3), TopoAuditNode("p5-b", "p5.48xlarge", 3),
          // Carried by a node of another flavor: not the flavor's.
          TopoAuditNode("b200-a", "p6-b200.48xlarge", 4, "other")}));
  EXPECT_EQ(warning.reason, "TopologyLevelUnlabelled");
  EXPECT_EQ(warning.message,
            "ResourceFlavor gpu's Topology aws names level topology.k8s.aws/network-node-layer-4, "
            "which none of its 2 nodes carries: Kueue's topology-aware scheduling leaves out every "
            "node lacking a level, so the flavor has no topology capacity");
}

TEST(TopologyAudit, AFlavorThatSelectsNoNodeIsCheckedAgainstEveryNode) {
  const TopologyWarning warning = TopoAuditOnlyWarning(
      TopoAuditOfGpuFlavor(4, {TopoAuditNode("p5-a", "p5.48xlarge", 3)}, "aws", "nowhere"));
  EXPECT_NE(warning.message.find("names level topology.k8s.aws/network-node-layer-4, which no "
                                 "node carries"),
            std::string::npos)
      << warning.message;
}

TEST(TopologyAudit, AFlavorNamingAMissingTopologyIsNotFound) {
  const TopologyWarning warning = TopoAuditOnlyWarning(
      TopoAuditOfGpuFlavor(3, {TopoAuditNode("p5-a", "p5.48xlarge", 3)}, "aws-typo"));
  EXPECT_EQ(warning.reason, "TopologyNotFound");
  EXPECT_EQ(warning.message,
            "ResourceFlavor gpu names Topology aws-typo, which does not exist: Kueue admits no "
            "workload to the flavor by topology until it does");
}

TEST(TopologyAudit, WarningsComeByReasonThenName) {
  TopologyAudit audit;
  audit.AddTopology(TopoAuditTopology("deep", 4));
  audit.AddResourceFlavor(TopoAuditFlavor("b-missing", "none", "other"));
  audit.AddResourceFlavor(TopoAuditFlavor("a-missing", "none"));
  audit.AddResourceFlavor(TopoAuditFlavor("mixed", "deep"));
  audit.AddNode(TopoAuditNode("z", "p5.48xlarge", 3));
  audit.AddNode(TopoAuditNode("y", "p5.48xlarge", 2));
  audit.AddNode(TopoAuditNode("x", "p6-b200.48xlarge", 4));
  audit.AddNode(TopoAuditNode("w", "p6-b200.48xlarge", 3));
  EXPECT_EQ(
      TopoAuditReasons(audit.Warnings()),
      (std::vector<std::string>{"NodeMissingTopologyLevel", "NodeMissingTopologyLevel",
                                "MixedTopologyDepths", "TopologyNotFound", "TopologyNotFound"}));
  EXPECT_NE(audit.Warnings()[0].message.find("p5.48xlarge"), std::string::npos);
  EXPECT_NE(audit.Warnings()[3].message.find("a-missing"), std::string::npos);
}

TEST(TopologyAudit, TenThousandNodesMissingALevelAreCountedAndAFewNamed) {
  TopologyAudit audit;
  audit.AddTopology(TopoAuditTopology("aws", 3));
  audit.AddResourceFlavor(TopoAuditFlavor("gpu", "aws"));
  for (int i = 0; i < 10000; ++i) {
    audit.AddNode(TopoAuditNode("short-" + std::to_string(10000 + i), "p5.48xlarge", 2));
  }
  audit.AddNode(TopoAuditNode("full", "p5.48xlarge", 3));
  const std::vector<TopologyWarning> warnings = audit.Warnings();
  // Not a mixed depth: the type's depth is 3, the nodes short of it are the type's problem.
  ASSERT_EQ(TopoAuditReasons(warnings), (std::vector<std::string>{"NodeMissingTopologyLevel"}));
  EXPECT_NE(warnings[0].message.find("10000 p5.48xlarge nodes lack"), std::string::npos);
  EXPECT_NE(warnings[0].message.find("(short-10000, short-10001, short-10002 and 9997 more)"),
            std::string::npos)
      << warnings[0].message;
  for (const TopologyWarning& warning : warnings) EXPECT_LT(warning.message.size(), 600u);
}

TEST(TopologyAudit, TheCensusIsWhatTheLearnedCatalogCounts) {
  core::TopologyLevelCensus census;
  census.Add("a", {1, 2, 3});
  census.Add("b", {1, 2});
  census.Add("c", {});
  EXPECT_EQ(census.Layers(), (std::set<int>{1, 2, 3}));
  EXPECT_EQ(census.NodesMissingLevel().count(), 2u);
  EXPECT_EQ(census.NodesMissingLevel().Describe(), "b, c");
  EXPECT_EQ(census.LayersMissing(), (std::set<int>{1, 2, 3}));
}

}  // namespace
}  // namespace ncclguard::test
