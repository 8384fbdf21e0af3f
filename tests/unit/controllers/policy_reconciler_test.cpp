// The NcclPolicy controller's pure reconciler: the key, and the status it asks for.
#include <gtest/gtest.h>

#include <variant>

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
  const ReconcileResult result = ReconcileNcclPolicy({"default"}, Policy(23456), kPolicyT0);
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
  const ReconcileResult result = ReconcileNcclPolicy({"default"}, object, kPolicyT0);
  const Json& condition = OnlyPatch(result).patch["status"]["conditions"][0];
  EXPECT_EQ(condition["status"], "False");
  EXPECT_EQ(condition["reason"], "Invalid");
  const std::string message = condition["message"];
  EXPECT_NE(message.find("spec.rendezvousPort"), std::string::npos) << message;
  EXPECT_NE(message.find("keeping the previous policy"), std::string::npos) << message;

  // Level-triggered: once the status says so, the next reconcile has nothing to do.
  object.merge_patch(OnlyPatch(result).patch);
  EXPECT_TRUE(
      ReconcileNcclPolicy({"default"}, object, kPolicyT0 + std::chrono::hours(1)).actions.empty());
}

TEST(ReconcileNcclPolicy, LeavesOtherNamesAndDeletedObjectsAlone) {
  Json other = Policy(23456);
  other["metadata"]["name"] = "team-a";
  EXPECT_TRUE(ReconcileNcclPolicy({"team-a"}, other, kPolicyT0).actions.empty());
  EXPECT_TRUE(ReconcileNcclPolicy({"default"}, std::nullopt, kPolicyT0).actions.empty());
}

}  // namespace
}  // namespace ncclguard::test
