// The NcclPolicy controller's pure reconciler: the key, and the status it asks for.
#include <gtest/gtest.h>

#include <variant>

#include "controllers/policy_object.h"
#include "controllers/policy_reconciler.h"

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
