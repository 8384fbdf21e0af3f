// The controller seam without threads or an API server: typed keys through the type-erased
// spec, and the watches of the two controllers `ncclguard controller` runs (which changes
// matter, which keys they map to). The caches are built but never started.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <sstream>

#include "controllers/labels.h"
#include "log/log.h"
#include "manager/cache.h"
#include "manager/controller.h"
#include "manager/wiring.h"

namespace ncclguard::test {
namespace {

using controllers::JobKey;
using controllers::PolicyKey;
using core::Json;
using core::WorkloadKind;
using manager::Change;

std::shared_ptr<kube::Client> UnusedClient() {
  kube::ClientConfig config;
  config.server = "https://127.0.0.1:1";  // never contacted: the informers are not started
  return std::make_shared<kube::Client>(config);
}

template <typename Key>
const manager::Watch<Key>& WatchOf(const manager::ControllerSpec<Key>& spec,
                                   const kube::Informer& informer) {
  const auto found = std::find_if(spec.watches.begin(), spec.watches.end(),
                                  [&](const auto& watch) { return watch.informer == &informer; });
  if (found == spec.watches.end()) throw std::runtime_error("not watched");
  return *found;
}

template <typename Key>
bool Matters(const manager::Watch<Key>& watch, const Json* old_object, const Json* new_object) {
  return !watch.predicate || watch.predicate(Change{old_object, new_object});
}

Json Object(const std::string& ns, const std::string& name) {
  Json object{{"metadata", {{"name", name}}}};
  if (!ns.empty()) object["metadata"]["namespace"] = ns;
  return object;
}

class Wiring : public ::testing::Test {
 protected:
  manager::Caches caches_{UnusedClient()};
  manager::PolicySource policy_{core::Policy::Defaults()};
};

TEST_F(Wiring, TypedKeysGoThroughTheQueueAsTextAndJunkIsDropped) {
  manager::ControllerSpec<JobKey> spec;
  spec.name = "test";
  spec.watches.push_back({nullptr,
                          [](const Json& object) {
                            return std::vector<JobKey>{{core::WorkloadKind::MpiJob, "ns",
                                                        controllers::Meta(object, "name")}};
                          },
                          nullptr});
  spec.all_keys = [] { return std::vector<JobKey>{{core::WorkloadKind::JobSet, "a", "b"}}; };
  std::vector<JobKey> reconciled;
  spec.reconcile = [&reconciled](const JobKey& key) {
    reconciled.push_back(key);
    return controllers::ReconcileResult{};
  };
  const manager::Controller::Spec erased = manager::Erase(std::move(spec));
  EXPECT_EQ(erased.watches.at(0).map(Object("ns", "x")), std::vector<std::string>{"MPIJob/ns/x"});
  EXPECT_EQ(erased.all_keys(), std::vector<std::string>{"JobSet/a/b"});
  EXPECT_TRUE(erased.reconcile("PyTorchJob/ns/y"));
  EXPECT_FALSE(erased.reconcile("not a key"));
  EXPECT_EQ(reconciled, (std::vector<JobKey>{{core::WorkloadKind::PyTorchJob, "ns", "y"}}));
}

TEST_F(Wiring, TrainingJobsAreRequeuedForPolicySpecChangesNotForStatusWrites) {
  const auto spec = manager::TrainingJobController(caches_, policy_, 2);
  const auto& watch = WatchOf(spec, caches_.policies());
  Json before = Object("", "default");
  before["spec"] = {{"rendezvousPort", 23456}};
  Json status_written = before;
  status_written["status"] = {{"observedGeneration", 1}};
  Json spec_changed = before;
  spec_changed["spec"]["rendezvousPort"] = 23457;
  EXPECT_TRUE(Matters(watch, nullptr, &before));
  EXPECT_FALSE(Matters(watch, &before, &status_written));
  EXPECT_TRUE(Matters(watch, &status_written, &spec_changed));
  EXPECT_TRUE(Matters(watch, &before, nullptr));
  const Json other = Object("", "team-a");
  EXPECT_FALSE(Matters(watch, nullptr, &other));
}

TEST_F(Wiring, NamespacesMatterWhenAddedOrRelabelled) {
  const auto spec = manager::TrainingJobController(caches_, policy_, 2);
  const auto& watch = WatchOf(spec, caches_.namespaces());
  const Json plain = Object("", "team-a");
  Json enabled = plain;
  enabled["metadata"]["labels"] = {{"ncclguard.io/enabled", "true"}};
  Json annotated = enabled;
  annotated["metadata"]["annotations"] = {{"note", "x"}};
  EXPECT_TRUE(Matters(watch, nullptr, &plain));
  EXPECT_TRUE(Matters(watch, &plain, &enabled));
  EXPECT_FALSE(Matters(watch, &enabled, &annotated));
  EXPECT_FALSE(Matters(watch, &enabled, nullptr));
}

TEST_F(Wiring, ServicesMapToTheirControllingJobAndEventDeletionsToNothing) {
  const auto spec = manager::TrainingJobController(caches_, policy_, 2);
  Json service = Object("team-a", "llama");
  service["metadata"]["ownerReferences"] = {
      {{"apiVersion", "kubeflow.org/v1"},
       {"kind", "PyTorchJob"},
       {"name", "llama"},
       {"controller", true}},
      {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"name", "other"}, {"controller", false}}};
  EXPECT_EQ(WatchOf(spec, caches_.services()).map(service),
            (std::vector<JobKey>{{core::WorkloadKind::PyTorchJob, "team-a", "llama"}}));
  const Json event = Object("team-a", "e1");
  EXPECT_FALSE(Matters(WatchOf(spec, caches_.events()), &event, nullptr));
  EXPECT_EQ(WatchOf(spec, caches_.Job(core::WorkloadKind::JobSet)).map(Object("team-a", "js")),
            (std::vector<JobKey>{{core::WorkloadKind::JobSet, "team-a", "js"}}));
}

// The catalog learned from the nodes is policy: its counts changing requeues every job; a node
// joining a type (the same counts) does not.
TEST_F(Wiring, TrainingJobsAreRequeuedWhenTheLearnedCountsChangeNotWhenNodesComeAndGo) {
  const auto spec = manager::TrainingJobController(caches_, policy_, 2);
  const auto& watch = WatchOf(spec, caches_.policies());
  Json before = Object("", "default");
  before["status"]["observedInstanceTypes"] =
      Json::array({{{"name", "x9.48xlarge"}, {"gpus", 8}, {"efaDevices", 4}, {"nodes", 1}}});
  Json more_nodes = before;
  more_nodes["status"]["observedInstanceTypes"][0]["nodes"] = 2;
  more_nodes["status"]["observedInstanceTypes"][0]["nodeNames"] = {"a", "b"};
  Json more_efa = more_nodes;
  more_efa["status"]["observedInstanceTypes"][0]["efaDevices"] = 8;
  EXPECT_FALSE(Matters(watch, &before, &more_nodes));
  EXPECT_TRUE(Matters(watch, &more_nodes, &more_efa));
}

// Nodes matter to the policy controller when what the catalog reads of them changes.
TEST_F(Wiring, ThePolicyControllerLearnsFromNodeCapacityAndLabelsOnly) {
  const auto policies = manager::NcclPolicyController(caches_);
  const auto& watch = WatchOf(policies, caches_.nodes());
  Json node = Object("", "n1");
  node["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "ml.p5.48xlarge";
  node["status"]["capacity"] = {{"nvidia.com/gpu", "8"}, {"vpc.amazonaws.com/efa", "32"}};
  Json cordoned = node;
  cordoned["spec"]["unschedulable"] = true;
  Json fewer = node;
  fewer["status"]["capacity"]["vpc.amazonaws.com/efa"] = "16";
  Json relabelled = node;
  relabelled["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "x9.48xlarge";
  EXPECT_EQ(watch.map(node), std::vector<PolicyKey>{{"default"}});
  EXPECT_TRUE(Matters(watch, nullptr, &node));
  EXPECT_FALSE(Matters(watch, &node, &cordoned));
  EXPECT_TRUE(Matters(watch, &node, &fewer));
  EXPECT_TRUE(Matters(watch, &node, &relabelled));
  EXPECT_TRUE(Matters(watch, &node, nullptr));
}

TEST_F(Wiring, ThePolicyControllerSharesTheNcclPolicyCacheAndReadsOnlyDefault) {
  const auto jobs = manager::TrainingJobController(caches_, policy_, 2);
  const auto policies = manager::NcclPolicyController(caches_);
  // One informer per kind: both controllers watch the same one.
  EXPECT_EQ(WatchOf(jobs, caches_.policies()).informer,
            WatchOf(policies, caches_.policies()).informer);
  const auto& watch = WatchOf(policies, caches_.policies());
  EXPECT_EQ(watch.map(Object("", "default")), std::vector<PolicyKey>{{"default"}});
  EXPECT_TRUE(watch.map(Object("", "team-a")).empty());
  EXPECT_TRUE(policies.all_keys().empty());  // nothing cached
  EXPECT_TRUE(policies.reconcile({"default"}).actions.empty());
}

// The status write that the NcclPolicy controller's observer reads: the learned catalog, one type.
controllers::ReconcileResult CatalogWrite(int nodes_missing_topology_level) {
  Json entry = {{"name", "p5.48xlarge"},
                {"gpus", 8},
                {"efaDevices", 32},
                {"nodes", 3},
                {"observedTime", "2026-12-02T14:00:00Z"},
                {"topologyLevels", {"topology.k8s.aws/network-node-layer-1"}}};
  if (nodes_missing_topology_level > 0) {
    entry["nodesMissingTopologyLevel"] = nodes_missing_topology_level;
  }
  controllers::ReconcileResult result;
  result.actions.push_back(
      controllers::MergePatch{{.api_version = "ncclguard.io/v1alpha1",
                               .kind = "NcclPolicy",
                               .namespace_ = "",
                               .name = "default",
                               .uid = "",
                               .resource = "ncclpolicies"},
                              true,
                              {{"status", {{"observedInstanceTypes", Json::array({entry})}}}}});
  return result;
}

TEST_F(Wiring, ThePolicyControllerLogsNodesMissingATopologyLevelOnceTheStatusSaysSo) {
  const auto policies = manager::NcclPolicyController(caches_);
  ASSERT_TRUE(policies.observe);
  EXPECT_EQ(policies.observe({"default"}, controllers::ReconcileResult{}), nullptr);
  EXPECT_EQ(policies.observe({"default"}, CatalogWrite(0)), nullptr);
  const manager::Applied applied = policies.observe({"default"}, CatalogWrite(2));
  ASSERT_NE(applied, nullptr);

  std::ostringstream out;
  log::Options options;
  options.format = log::Format::Json;
  options.sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out, /*force_flush=*/true);
  log::Configure(options);
  applied(1);
  log::Configure(log::Options{});
  const Json line = Json::parse(out.str());
  EXPECT_EQ(line["level"], "warning");
  EXPECT_NE(
      line["msg"].get<std::string>().find("Kueue's topology-aware scheduling leaves them out"),
      std::string::npos);
  EXPECT_EQ(line["instanceType"], "p5.48xlarge");
  EXPECT_EQ(line["nodesMissingTopologyLevel"], 2);
}

}  // namespace
}  // namespace ncclguard::test
