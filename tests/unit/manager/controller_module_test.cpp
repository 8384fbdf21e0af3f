// The controller declarations (manager/controller_module.h): what the manager builds from them
// (one informer per resource, the union of the fields kept) and the RBAC they add up to, which
// `ncclguard controller --print-rbac` prints and scripts/check-chart.sh compares with the chart.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "core/kinds.h"
#include "kube/resource.h"
#include "manager/cache.h"
#include "manager/controller_module.h"
#include "manager/manager.h"

namespace ncclguard::test {
namespace {

using core::Json;
using manager::Access;

// Every (scope, group, resource, verb, name) the rules grant; "*" for any name.
using Grant = std::tuple<bool, std::string, std::string, std::string, std::string>;

std::set<Grant> Grants(const std::vector<Access>& rules) {
  std::set<Grant> grants;
  for (const Access& rule : rules) {
    const std::vector<std::string> names =
        rule.resource_names.empty() ? std::vector<std::string>{"*"} : rule.resource_names;
    for (const auto& resource : rule.resources) {
      for (const auto& verb : rule.verbs) {
        for (const auto& name : names) {
          grants.insert({rule.in_own_namespace, rule.group, resource, verb, name});
        }
      }
    }
  }
  return grants;
}

bool Has(const std::set<Grant>& grants, const std::string& group, const std::string& resource,
         const std::string& verb) {
  return grants.contains({false, group, resource, verb, "*"});
}

std::shared_ptr<kube::Client> NeverContactedClient() {
  kube::ClientConfig config;
  config.server = "https://127.0.0.1:1";  // never contacted: the informers are not started
  return std::make_shared<kube::Client>(config);
}

TEST(ControllerModules, EachDeclaresAUniqueNameWhatItReadsAndHowToInstallIt) {
  std::set<std::string> names;
  ASSERT_GE(manager::ControllerModules().size(), 3u);
  for (const manager::ControllerModule* module : manager::ControllerModules()) {
    SCOPED_TRACE(module->name);
    EXPECT_TRUE(names.insert(module->name).second);
    EXPECT_FALSE(module->summary.empty());
    EXPECT_FALSE(module->reads.empty());
    EXPECT_TRUE(module->install);
    EXPECT_EQ(manager::FindControllerModule(module->name), module);
  }
  EXPECT_EQ(manager::FindControllerModule("no-such-controller"), nullptr);
}

TEST(ControllerModules, TheKueueCheckRunsOnlyWhenItsFlagIsGiven) {
  const manager::ControllerModule* kueue = manager::FindControllerModule("kueue-preflight");
  ASSERT_NE(kueue, nullptr);
  EXPECT_EQ(kueue->flag, "kueue-admission-check");
  manager::ManagerOptions options;
  EXPECT_FALSE(manager::ModuleEnabled(*kueue, options));
  EXPECT_TRUE(manager::ModuleEnabled(*manager::FindControllerModule("trainingjob"), options));
  options.enable.insert("kueue-admission-check");
  EXPECT_TRUE(manager::ModuleEnabled(*kueue, options));
}

TEST(RequiredAccess, EveryManagedKindOfTheKindTableIsReadPatchedAndGivenConditions) {
  const std::set<Grant> grants = Grants(manager::RequiredAccess(manager::ManagerOptions{}));
  for (const core::KindInfo& info : core::ManagedKinds()) {
    const kube::ResourceRef resource = manager::watched::ForKind(info.kind);
    SCOPED_TRACE(resource.resource);
    for (const char* verb : {"get", "list", "watch", "patch"}) {
      EXPECT_TRUE(Has(grants, resource.group, resource.resource, verb)) << verb;
    }
    EXPECT_TRUE(Has(grants, resource.group, resource.resource + "/status", "patch"));
    EXPECT_FALSE(Has(grants, resource.group, resource.resource, "delete"));
    EXPECT_FALSE(Has(grants, resource.group, resource.resource, "update"));
  }
}

TEST(RequiredAccess, WhatAControllerReadsItListsAndWatchesAndNothingMore) {
  const std::set<Grant> grants = Grants(manager::RequiredAccess(manager::ManagerOptions{}));
  EXPECT_TRUE(Has(grants, "", "pods", "list"));
  EXPECT_TRUE(Has(grants, "", "pods", "watch"));
  EXPECT_FALSE(Has(grants, "", "pods", "get"));
  EXPECT_TRUE(Has(grants, "", "pods/log", "get"));
  EXPECT_TRUE(Has(grants, "", "nodes", "list"));
  EXPECT_FALSE(Has(grants, "", "nodes", "patch"));
  EXPECT_FALSE(Has(grants, "", "secrets", "get"));
  // Kueue's resources only when its controller is on.
  EXPECT_FALSE(Has(grants, "kueue.x-k8s.io", "workloads", "list"));
  manager::ManagerOptions kueue;
  kueue.enable.insert("kueue-admission-check");
  const std::set<Grant> with_kueue = Grants(manager::RequiredAccess(kueue));
  EXPECT_TRUE(Has(with_kueue, "kueue.x-k8s.io", "workloads", "watch"));
  EXPECT_TRUE(Has(with_kueue, "kueue.x-k8s.io", "workloads/status", "patch"));
  EXPECT_FALSE(Has(with_kueue, "kueue.x-k8s.io", "workloads", "patch"));
}

TEST(RequiredAccess, TheLeaseAndTheOwnerAreNamedAndInTheControllersOwnNamespace) {
  manager::ManagerOptions options;
  options.lease_name = "my-lease";
  options.owner = kube::OwnerReference{"v1", "ServiceAccount", "my-sa", "uid-1"};
  const std::set<Grant> grants = Grants(manager::RequiredAccess(options));
  EXPECT_TRUE(grants.contains({true, "coordination.k8s.io", "leases", "create", "*"}));
  EXPECT_TRUE(grants.contains({true, "coordination.k8s.io", "leases", "update", "my-lease"}));
  EXPECT_FALSE(grants.contains({true, "coordination.k8s.io", "leases", "update", "*"}));
  EXPECT_TRUE(grants.contains({true, "", "serviceaccounts", "get", "my-sa"}));
  options.leader_elect = false;
  options.owner.reset();
  for (const Grant& grant : Grants(manager::RequiredAccess(options))) {
    EXPECT_FALSE(std::get<0>(grant)) << "no leader election, no owner: nothing namespaced";
  }
}

TEST(RequiredAccess, RulesAreMergedAndSortedSoThePrintedListIsStable) {
  const auto first = manager::RequiredAccess(manager::ManagerOptions{});
  const auto again = manager::RequiredAccess(manager::ManagerOptions{});
  ASSERT_EQ(first.size(), again.size());
  std::set<std::tuple<bool, std::string, std::vector<std::string>, std::vector<std::string>>>
      scopes;
  for (std::size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].resources, again[i].resources);
    EXPECT_EQ(first[i].verbs, again[i].verbs);
    EXPECT_TRUE(std::is_sorted(first[i].verbs.begin(), first[i].verbs.end()));
    // One rule per scope, group, names and verb set.
    EXPECT_TRUE(scopes
                    .insert({first[i].in_own_namespace, first[i].group, first[i].resource_names,
                             first[i].verbs})
                    .second);
  }
}

TEST(RequiredAccess, PrintedAsKubernetesPolicyRulesSplitByScope) {
  manager::ManagerOptions options;
  options.lease_name = "the-lease";
  const Json rbac = manager::AccessAsRbac(manager::RequiredAccess(options));
  ASSERT_TRUE(rbac["clusterRules"].is_array());
  ASSERT_TRUE(rbac["namespaceRules"].is_array());
  bool lease_named = false;
  for (const Json& rule : rbac["namespaceRules"]) {
    if (rule["apiGroups"] == Json::array({"coordination.k8s.io"}) &&
        rule.contains("resourceNames")) {
      EXPECT_EQ(rule["resourceNames"], Json::array({"the-lease"}));
      EXPECT_EQ(rule["verbs"], Json::array({"get", "update"}));
      lease_named = true;
    }
  }
  EXPECT_TRUE(lease_named);
  for (const Json& rule : rbac["clusterRules"]) {
    EXPECT_FALSE(rule.contains("resourceNames")) << rule.dump();
    EXPECT_NE(rule["apiGroups"], Json::array({"coordination.k8s.io"}));
  }
}

TEST(Caches, OneInformerPerResourceHoweverManyControllersReadIt) {
  const manager::Caches caches(NeverContactedClient());
  for (const kube::Informer* informer : caches.All()) ASSERT_NE(informer, nullptr);
  // Nodes are read by the training-job and the Kueue controllers: one informer.
  EXPECT_EQ(&caches.nodes(), &caches.Get(kube::resources::Nodes()));
  EXPECT_THROW(caches.Get(kube::resources::ConfigMaps()), std::out_of_range);
  const manager::Caches without_kueue(
      NeverContactedClient(), std::vector<manager::Reads>{{kube::resources::Nodes(), nullptr, {}}});
  EXPECT_EQ(without_kueue.All().size(), 1u);
}

TEST(Caches, TwoControllersReadingOneResourceKeepTheUnionOfTheirFields) {
  const kube::Projection labels = [](const Json& object) {
    return Json{{"metadata", {{"labels", object["metadata"]["labels"]}}}};
  };
  const kube::Projection spec = [](const Json& object) {
    return Json{{"metadata", {{"name", object["metadata"]["name"]}}}, {"spec", object["spec"]}};
  };
  const Json node{{"metadata", {{"name", "n1"}, {"labels", {{"a", "b"}}}, {"uid", "u"}}},
                  {"spec", {{"unschedulable", true}}},
                  {"status", {{"capacity", {{"cpu", "8"}}}}}};
  const Json both = manager::UnionOf({labels, spec})(node);
  EXPECT_EQ(both, (Json{{"metadata", {{"labels", {{"a", "b"}}}, {"name", "n1"}}},
                        {"spec", {{"unschedulable", true}}}}));
  // Someone keeping the whole object wins.
  EXPECT_EQ(manager::UnionOf({labels, nullptr}), nullptr);
}

}  // namespace
}  // namespace ncclguard::test
