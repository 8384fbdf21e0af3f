// The NcclPolicy controller's pure reconciler: the key, and the status it asks for.
#include <gtest/gtest.h>

#include <variant>

#include "controllers/observed_catalog.h"
#include "controllers/policy_object.h"
#include "controllers/policy_reconciler.h"
#include "core/errors.h"

namespace ncclguard::test {
namespace {

using namespace controllers;

const Timestamp kPolicyT0 =
    std::chrono::sys_days(std::chrono::year(2026) / 12 / 2) + std::chrono::hours(14);

Json Policy(int port) {
  return {{"apiVersion", "ncclguard.io/v1alpha1"},
          {"kind", "NcclPolicy"},
          {"metadata", {{"name", "default"}, {"generation", 2}, {"uid", "u-1"}}},
          {"spec", {{"rendezvousPort", port}}}};
}

// The one status patch the reconcile asks for.
const MergePatch& OnlyPatch(const ReconcileResult& result) {
  EXPECT_EQ(result.actions.size(), 1u);
  const auto* patch = std::get_if<MergePatch>(&result.actions.at(0));
  EXPECT_NE(patch, nullptr);
  return *patch;
}

TEST(PolicyKey, IsTheObjectName) {
  EXPECT_EQ(PolicyKey::Parse("default"), PolicyKey{"default"});
  EXPECT_EQ(PolicyKey{"default"}.ToString(), "default");
  EXPECT_FALSE(PolicyKey::Parse(""));
  EXPECT_FALSE(PolicyKey::Parse("PyTorchJob/ns/x"));
}

TEST(ReconcileNcclPolicy, AcceptsAUsablePolicyThroughTheStatusSubresource) {
  const ReconcileResult result = ReconcileNcclPolicy({"default"}, Policy(23456), {}, kPolicyT0);
  const MergePatch& patch = OnlyPatch(result);
  EXPECT_TRUE(patch.status_subresource);
  EXPECT_EQ(patch.target.resource, "ncclpolicies");
  EXPECT_EQ(patch.target.name, "default");
  EXPECT_EQ(patch.target.namespace_, "");
  EXPECT_EQ(patch.target.uid, "u-1");
  EXPECT_EQ(RestPath(patch.target, false, true),
            "/apis/ncclguard.io/v1alpha1/ncclpolicies/default/status");
  EXPECT_EQ(patch.patch["status"]["observedGeneration"], 2);
  EXPECT_EQ(patch.patch["status"]["conditions"][0]["type"], "Accepted");
  EXPECT_EQ(patch.patch["status"]["conditions"][0]["status"], "True");
}

TEST(ReconcileNcclPolicy, RefusesAnUnusablePolicyNamingTheFieldThenSaysNothingMore) {
  Json object = Policy(70000);
  const ReconcileResult result = ReconcileNcclPolicy({"default"}, object, {}, kPolicyT0);
  const Json& condition = OnlyPatch(result).patch["status"]["conditions"][0];
  EXPECT_EQ(condition["status"], "False");
  EXPECT_EQ(condition["reason"], "Invalid");
  const std::string message = condition["message"];
  EXPECT_NE(message.find("spec.rendezvousPort"), std::string::npos) << message;
  EXPECT_NE(message.find("keeping the previous policy"), std::string::npos) << message;

  // Level-triggered: once the status says so, the next reconcile has nothing to do.
  object.merge_patch(OnlyPatch(result).patch);
  EXPECT_TRUE(ReconcileNcclPolicy({"default"}, object, {}, kPolicyT0 + std::chrono::hours(1))
                  .actions.empty());
}

TEST(ReconcileNcclPolicy, LeavesOtherNamesAndDeletedObjectsAlone) {
  Json other = Policy(23456);
  other["metadata"]["name"] = "team-a";
  EXPECT_TRUE(ReconcileNcclPolicy({"team-a"}, other, {}, kPolicyT0).actions.empty());
  EXPECT_TRUE(ReconcileNcclPolicy({"default"}, std::nullopt, {}, kPolicyT0).actions.empty());
}

Json Node(const std::string& name, const std::string& type, const std::string& gpus,
          const std::string& efa) {
  Json node{
      {"metadata", {{"name", name}, {"labels", {{"node.kubernetes.io/instance-type", type}}}}}};
  if (!gpus.empty()) node["status"]["capacity"]["nvidia.com/gpu"] = gpus;
  if (!efa.empty()) node["status"]["capacity"]["vpc.amazonaws.com/efa"] = efa;
  return node;
}

TEST(ReconcileNcclPolicy, PublishesTheInstanceTypesItsNodesAdvertise) {
  Json object = Policy(23456);
  std::vector<Json> nodes{Node("hp-1", "ml.p5.48xlarge", "8", "32"),
                          // Short of devices: its own problem, not the type's count.
                          Node("hp-0", "ml.p5.48xlarge", "8", "16"),
                          Node("new-0", "x9.48xlarge", "8", "4"),
                          Node("cpu-0", "m5.xlarge", "", ""), Node("unlabelled", "", "8", "32")};
  nodes.back()["metadata"].erase("labels");
  const ReconcileResult first = ReconcileNcclPolicy({"default"}, object, nodes, kPolicyT0);
  const Json& observed = OnlyPatch(first).patch["status"]["observedInstanceTypes"];
  ASSERT_EQ(observed.size(), 2u) << observed.dump();
  EXPECT_EQ(observed[0], (Json{{"name", "ml.p5.48xlarge"},
                               {"gpus", 8},
                               {"efaDevices", 32},
                               {"nodes", 2},
                               {"nodeNames", {"hp-0", "hp-1"}},
                               {"observedTime", "2026-12-02T14:00:00Z"}}));
  EXPECT_EQ(observed[1]["name"], "x9.48xlarge");
  EXPECT_EQ(observed[1]["efaDevices"], 4);

  // The policy in force (the webhook's and the gate's) learned them; a built-in count stays.
  object.merge_patch(OnlyPatch(first).patch);
  const core::Policy policy = PolicyFromObject(object);
  ASSERT_NE(policy.FindInstanceType("x9.48xlarge"), nullptr);
  EXPECT_EQ(policy.FindInstanceType("x9.48xlarge")->efa_devices, 4);
  EXPECT_EQ(policy.FindInstanceType("x9.48xlarge")->source, core::CatalogSource::Observed);
  EXPECT_EQ(policy.FindInstanceType("ml.p5.48xlarge")->efa_devices, 32);

  // Level-triggered: nothing new, nothing written.
  const auto later = kPolicyT0 + std::chrono::hours(1);
  EXPECT_TRUE(ReconcileNcclPolicy({"default"}, object, nodes, later).actions.empty());

  // A third node of the type: counted, its counts' time kept.
  nodes.push_back(Node("hp-2", "ml.p5.48xlarge", "8", "32"));
  const ReconcileResult more = ReconcileNcclPolicy({"default"}, object, nodes, later);
  const Json& grown = OnlyPatch(more).patch["status"]["observedInstanceTypes"][0];
  EXPECT_EQ(grown["nodes"], 3);
  EXPECT_EQ(grown["observedTime"], "2026-12-02T14:00:00Z");

  // More devices than before (a new generation of the type): the count and its time change.
  nodes.back() = Node("hp-2", "ml.p5.48xlarge", "8", "64");
  const ReconcileResult raised = ReconcileNcclPolicy({"default"}, object, nodes, later);
  const Json& now = OnlyPatch(raised).patch["status"]["observedInstanceTypes"][0];
  EXPECT_EQ(now["efaDevices"], 64);
  EXPECT_EQ(now["observedTime"], "2026-12-02T15:00:00Z");
}

// Each type's topology: the network-node-layer labels its nodes carry (3 on p5, 4 on p6-b200),
// nodes that lack one of them, and UltraServers.
Json LayeredNode(const std::string& name, const std::string& type, int layers,
                 const std::string& ultraserver = "") {
  Json node = Node(name, type, "8", "32");
  for (int layer = 1; layer <= layers; ++layer) {
    node["metadata"]["labels"]["topology.k8s.aws/network-node-layer-" + std::to_string(layer)] =
        "nn-" + name + "-" + std::to_string(layer);
  }
  if (!ultraserver.empty()) {
    node["metadata"]["labels"]["topology.k8s.aws/ultraserver-id"] = ultraserver;
  }
  return node;
}

TEST(ReconcileNcclPolicy, LearnsEachTypesTopologyLevelsAtThreeAndFourLayers) {
  Json object = Policy(23456);
  const std::vector<Json> nodes{
      LayeredNode("p5-0", "p5.48xlarge", 3), LayeredNode("p5-1", "p5.48xlarge", 3),
      // Missing its deepest level: counted.
      LayeredNode("p5-2", "p5.48xlarge", 2), LayeredNode("b200-0", "p6-b200.48xlarge", 4, "us-1"),
      LayeredNode("plain-0", "x9.48xlarge", 0)};
  const ReconcileResult first = ReconcileNcclPolicy({"default"}, object, nodes, kPolicyT0);
  const Json& observed = OnlyPatch(first).patch["status"]["observedInstanceTypes"];
  ASSERT_EQ(observed.size(), 3u) << observed.dump();
  EXPECT_EQ(observed[0]["name"], "p5.48xlarge");
  EXPECT_EQ(observed[0]["topologyLevels"],
            (Json{"topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2",
                  "topology.k8s.aws/network-node-layer-3"}));
  EXPECT_EQ(observed[0]["nodesMissingTopologyLevel"], 1);
  EXPECT_FALSE(observed[0].contains("ultraServer"));
  EXPECT_EQ(observed[1]["name"], "p6-b200.48xlarge");
  EXPECT_EQ(observed[1]["topologyLevels"].size(), 4u);
  EXPECT_EQ(observed[1]["topologyLevels"].back(), "topology.k8s.aws/network-node-layer-4");
  EXPECT_EQ(observed[1]["ultraServer"], true);
  EXPECT_FALSE(observed[1].contains("nodesMissingTopologyLevel"));
  EXPECT_FALSE(observed[2].contains("topologyLevels"));  // no labels: nothing said

  // Read back as written; level-triggered.
  object.merge_patch(OnlyPatch(first).patch);
  const auto parsed = core::ParseObservedCatalog(object);
  ASSERT_EQ(parsed.size(), 3u);
  EXPECT_EQ(parsed[1].topology_levels.size(), 4u);
  EXPECT_TRUE(parsed[1].ultra_server);
  EXPECT_EQ(parsed[0].nodes_missing_topology_level, 1);
  EXPECT_EQ(core::ObservedCatalogJson(parsed), object["status"]["observedInstanceTypes"]);
  EXPECT_TRUE(ReconcileNcclPolicy({"default"}, object, nodes, kPolicyT0).actions.empty());

  // The missing level labelled: written again, the counts' time kept.
  std::vector<Json> fixed = nodes;
  fixed[2] = LayeredNode("p5-2", "p5.48xlarge", 3);
  EXPECT_TRUE(ObservedFieldsDiffer(nodes[2], fixed[2]));
  EXPECT_FALSE(ObservedFieldsDiffer(nodes[2], nodes[2]));
  const ReconcileResult relabelled =
      ReconcileNcclPolicy({"default"}, object, fixed, kPolicyT0 + std::chrono::hours(1));
  const Json& now = OnlyPatch(relabelled).patch["status"]["observedInstanceTypes"][0];
  EXPECT_FALSE(now.contains("nodesMissingTopologyLevel"));
  EXPECT_EQ(now["observedTime"], "2026-12-02T14:00:00Z");
}

// What the controller logs once the status is written: a type whose count of nodes missing a
// level becomes non-zero or changes; nothing when it stays or drops to zero.
TEST(ReconcileNcclPolicy, TheTypesToWarnOfAreThoseWhoseMissingLevelCountTheStatusChanges) {
  Json object = Policy(23456);
  const std::vector<Json> nodes{LayeredNode("p5-0", "p5.48xlarge", 3),
                                LayeredNode("p5-1", "p5.48xlarge", 2),
                                LayeredNode("b200-0", "p6-b200.48xlarge", 4)};
  const ReconcileResult first = ReconcileNcclPolicy({"default"}, object, nodes, kPolicyT0);
  const auto written = core::ParseObservedCatalog(OnlyPatch(first).patch);
  const auto changed = TopologyLevelChanges(written, {});
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0].name, "p5.48xlarge");
  EXPECT_EQ(changed[0].nodes_missing_topology_level, 1);
  EXPECT_TRUE(TopologyLevelChanges(written, written).empty());

  std::vector<Json> more = nodes;
  more.push_back(LayeredNode("p5-2", "p5.48xlarge", 0));
  object.merge_patch(OnlyPatch(first).patch);
  const ReconcileResult second = ReconcileNcclPolicy({"default"}, object, more, kPolicyT0);
  const auto rewritten = core::ParseObservedCatalog(OnlyPatch(second).patch);
  ASSERT_EQ(TopologyLevelChanges(rewritten, written).size(), 1u);
  EXPECT_EQ(TopologyLevelChanges(rewritten, written)[0].nodes_missing_topology_level, 2);

  std::vector<Json> fixed = nodes;
  fixed[1] = LayeredNode("p5-1", "p5.48xlarge", 3);
  const ReconcileResult third = ReconcileNcclPolicy({"default"}, object, fixed, kPolicyT0);
  EXPECT_TRUE(
      TopologyLevelChanges(core::ParseObservedCatalog(OnlyPatch(third).patch), written).empty());
}

TEST(ReconcileNcclPolicy, AnUnreadableTopologyLevelNamesTheField) {
  const auto error = [](Json entry) {
    entry["name"] = "p5.48xlarge";
    try {
      core::ParseObservedCatalog(Json::array({entry}));
    } catch (const core::PolicyError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error({{"topologyLevels", "layer-3"}}),
            "observedInstanceTypes[0].topologyLevels: expected a list");
  EXPECT_EQ(error({{"topologyLevels", {"kubernetes.io/hostname"}}}),
            "observedInstanceTypes[0].topologyLevels: \"kubernetes.io/hostname\" is not a "
            "topology.k8s.aws/network-node-layer-N label");
  EXPECT_EQ(error({{"topologyLevels",
                    Json(std::vector<std::string>(17, "topology.k8s.aws/network-node-layer-1"))}}),
            "observedInstanceTypes[0].topologyLevels: at most 16 levels");
  EXPECT_EQ(error({{"ultraServer", "yes"}}),
            "observedInstanceTypes[0].ultraServer: expected true or false");
  EXPECT_EQ(error({{"nodesMissingTopologyLevel", -1}}),
            "observedInstanceTypes[0].nodesMissingTopologyLevel: must be between 0 and 1000000");
}

TEST(ReconcileNcclPolicy, AStatusEditedIntoNonsenseIsWrittenAgainAndIsNotThePolicysError) {
  Json object = Policy(23456);
  object["status"]["observedInstanceTypes"] = Json::array({{{"name", 5}}});
  EXPECT_NO_THROW(PolicyFromObject(object));
  const ReconcileResult result =
      ReconcileNcclPolicy({"default"}, object, {Node("n", "x9.48xlarge", "8", "4")}, kPolicyT0);
  bool rewritten = false;
  for (const auto& action : result.actions) {
    if (const auto* patch = std::get_if<MergePatch>(&action)) {
      rewritten = rewritten || patch->patch["status"].contains("observedInstanceTypes");
      if (patch->patch["status"].contains("conditions")) {
        EXPECT_EQ(patch->patch["status"]["conditions"][0]["status"], "True");
      }
    }
  }
  EXPECT_TRUE(rewritten);
}

}  // namespace
}  // namespace ncclguard::test
