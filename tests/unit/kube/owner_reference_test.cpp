// Owner references on the objects the controller creates (the Lease here; the certificate
// Secret in tests/unit/manager/webhook_certs_test.cpp): what the garbage collector deletes them
// by on uninstall.
#include "kube/owner_reference.h"

#include <gtest/gtest.h>

#include "kube/leader_election.h"
#include "kube/resource.h"

namespace ncclguard::kube {
namespace {

const OwnerReference kAccount{"v1", "ServiceAccount", "ncclguard-controller", "uid-1"};

core::Json Expected(const OwnerReference& owner) {
  return {{"apiVersion", owner.api_version},
          {"kind", owner.kind},
          {"name", owner.name},
          {"uid", owner.uid}};
}

TEST(OwnerReference, TheLeaseIsCreatedWithTheOwnerWhenOneIsConfigured) {
  const ResourceRef lease =
      resources::Leases().In("ncclguard-system").Named("ncclguard-controller");
  const core::Json spec = {{"holderIdentity", "pod-a"}, {"leaseDurationSeconds", 15}};

  const core::Json owned = NewLeaseObject(lease, spec, kAccount);
  EXPECT_EQ(owned["apiVersion"], "coordination.k8s.io/v1");
  EXPECT_EQ(owned["kind"], "Lease");
  EXPECT_EQ(owned["metadata"]["name"], "ncclguard-controller");
  EXPECT_EQ(owned["metadata"]["namespace"], "ncclguard-system");
  EXPECT_EQ(owned["spec"], spec);
  EXPECT_EQ(owned["metadata"]["ownerReferences"], core::Json::array({Expected(kAccount)}));

  const core::Json unowned = NewLeaseObject(lease, spec, std::nullopt);
  EXPECT_FALSE(unowned["metadata"].contains("ownerReferences"));
}

TEST(OwnerReference, AnObjectWithoutTheOwnerGetsItAddedOnceKeepingOtherOwners) {
  const OwnerReference other{"apps/v1", "Deployment", "someone-else", "uid-9"};
  core::Json object = {{"metadata", {{"name", "x"}, {"ownerReferences", {Expected(other)}}}}};
  EXPECT_FALSE(HasOwnerReference(object, kAccount));

  EXPECT_TRUE(AddOwnerReference(object, kAccount));
  EXPECT_TRUE(HasOwnerReference(object, kAccount));
  EXPECT_EQ(object["metadata"]["ownerReferences"],
            core::Json::array({Expected(other), Expected(kAccount)}));

  // Already there: unchanged, so no write is needed.
  const core::Json before = object;
  EXPECT_FALSE(AddOwnerReference(object, kAccount));
  EXPECT_EQ(object, before);
}

TEST(OwnerReference, ARecreatedOwnerWithANewUidIsAddedNextToTheStaleOne) {
  core::Json object = {{"metadata", {{"ownerReferences", {Expected(kAccount)}}}}};
  OwnerReference recreated = kAccount;
  recreated.uid = "uid-2";
  EXPECT_TRUE(AddOwnerReference(object, recreated));
  EXPECT_EQ(object["metadata"]["ownerReferences"].size(), 2u);
}

TEST(OwnerReference, NoOwnerOrNoMetadataIsHandledWithoutThrowing) {
  core::Json object = {{"kind", "Lease"}};
  EXPECT_FALSE(AddOwnerReference(object, std::nullopt));
  EXPECT_EQ(object, core::Json({{"kind", "Lease"}}));

  EXPECT_TRUE(AddOwnerReference(object, kAccount));
  EXPECT_EQ(object["metadata"]["ownerReferences"], core::Json::array({Expected(kAccount)}));

  core::Json odd = {{"metadata", {{"ownerReferences", "not a list"}}}};
  EXPECT_FALSE(HasOwnerReference(odd, kAccount));
  EXPECT_FALSE(HasOwnerReference(core::Json("text"), kAccount));
}

}  // namespace
}  // namespace ncclguard::kube
