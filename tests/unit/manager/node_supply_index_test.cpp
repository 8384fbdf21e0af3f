#include "manager/node_supply_index.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "controllers/gate.h"
#include "controllers/job_kind.h"
#include "manager/waiting_keys.h"

namespace ncclguard::manager {
namespace {

using controllers::NodeDemand;
using controllers::NodeSupply;
using core::Json;

// Nodes and NodeValidations as the caches hold them, read the way the gate reads them without
// an index (CountNodes over every node of the type).
class ScanView : public controllers::ClusterView {
 public:
  std::map<std::string, Json> nodes;
  std::map<std::string, Json> validations;
  core::Policy policy = core::Policy::Defaults();

  std::optional<Json> Job(const controllers::JobKey&) const override { return std::nullopt; }
  std::vector<Json> PodsWithLabel(std::string_view, std::string_view,
                                  std::string_view) const override {
    return {};
  }
  std::optional<Json> Service(std::string_view, std::string_view) const override {
    return std::nullopt;
  }
  std::vector<Json> NodesWithLabel(std::string_view key, std::string_view value) const override {
    std::vector<Json> found;
    for (const auto& [name, node] : nodes) {
      const Json& labels = node["metadata"]["labels"];
      if (labels.contains(std::string(key)) && labels[std::string(key)] == std::string(value)) {
        found.push_back(node);
      }
    }
    return found;
  }
  std::optional<Json> NodeValidation(std::string_view name) const override {
    const auto found = validations.find(std::string(name));
    return found != validations.end() ? std::optional<Json>(found->second) : std::nullopt;
  }
  std::optional<Json> Namespace(std::string_view) const override { return std::nullopt; }
  std::vector<Json> EventsAbout(std::string_view, std::string_view,
                                std::string_view) const override {
    return {};
  }
  const core::Policy& Policy() const override { return policy; }
};

const std::vector<std::string> kTypes = {"p5.48xlarge", "ml.p5.48xlarge", "p4d.24xlarge"};

template <typename T>
const T& Pick(std::mt19937& random, const std::vector<T>& from) {
  return from[std::uniform_int_distribution<std::size_t>(0, from.size() - 1)(random)];
}

Json RandomNode(std::mt19937& random, const std::string& name) {
  Json node{{"metadata", {{"name", name}, {"labels", Json::object()}}}, {"spec", Json::object()}};
  node["metadata"]["labels"]["node.kubernetes.io/instance-type"] = Pick(random, kTypes);
  const std::string health =
      Pick(random, std::vector<std::string>{"", "", "Schedulable", "UnschedulablePendingReboot"});
  if (!health.empty()) {
    node["metadata"]["labels"]["sagemaker.amazonaws.com/node-health-status"] = health;
  }
  const std::string deep =
      Pick(random, std::vector<std::string>{"", "", "Passed", "InProgress", "Failed"});
  if (!deep.empty()) {
    node["metadata"]["labels"]["sagemaker.amazonaws.com/deep-health-check-status"] = deep;
  }
  if (random() % 4 == 0) node["spec"]["unschedulable"] = true;
  if (random() % 6 == 0) {
    node["spec"]["taints"] = Json::array({{{"key", "sagemaker.amazonaws.com/node-health-status"},
                                           {"value", "Unschedulable"},
                                           {"effect", "NoSchedule"}}});
  }
  return node;
}

Json RandomValidation(std::mt19937& random, const std::string& name) {
  Json validation{{"metadata", {{"name", name}}}};
  const std::string summary =
      Pick(random, std::vector<std::string>{"Pass", "Pass", "Warn", "Fail", "Fail", "Unknown", ""});
  if (summary.empty()) return validation;  // no status yet
  validation["status"] = {{"summary", summary}, {"checks", Json::array()}};
  if (summary == "Fail") {
    validation["status"]["checks"].push_back({{"id", "nvml-xid"}, {"status", "Pass"}});
    validation["status"]["checks"].push_back(
        {{"id", Pick(random, std::vector<std::string>{"efa-device-count", "gpu-p2p"})},
         {"status", "Fail"},
         {"observed", std::to_string(random() % 32)},
         {"expected", "32"}});
  }
  return validation;
}

void ExpectSameCount(const NodeSupplyIndex& index, ScanView& view, const std::string& context) {
  for (const bool count_unvalidated : {false, true}) {
    for (const bool node_health : {false, true}) {
      for (const bool deep : {false, true}) {
        view.policy.gate.count_unvalidated_nodes = count_unvalidated;
        view.policy.gate.hyperpod = {node_health, deep};
        for (const std::string& type : kTypes) {
          const NodeDemand demand{type, 3};
          const NodeSupply scanned = controllers::CountNodes(demand, view, view.policy);
          ASSERT_EQ(index.Count(demand, view.policy), scanned)
              << context << " type " << type << " counted " << scanned.counted << " failed "
              << scanned.failed << " first failed " << scanned.failed_node;
        }
      }
    }
  }
}

// The index counts exactly what reading every node would, whatever order nodes and their
// validations arrive, change and go in.
TEST(NodeSupplyIndex, CountsWhatReadingEveryNodeCountsThroughAnySequenceOfChanges) {
  for (const unsigned seed : {1u, 2u, 3u, 4u}) {
    std::mt19937 random(seed);
    NodeSupplyIndex index;
    ScanView view;
    for (int step = 0; step < 400; ++step) {
      const std::string name = "node-" + std::to_string(random() % 40);
      switch (random() % 5) {
        case 0:
        case 1:
          view.nodes[name] = RandomNode(random, name);
          index.NodeChanged(&view.nodes[name], name);
          break;
        case 2:
          view.nodes.erase(name);
          index.NodeChanged(nullptr, name);
          break;
        case 3:
          view.validations[name] = RandomValidation(random, name);
          index.ValidationChanged(&view.validations[name], name);
          break;
        default:
          view.validations.erase(name);
          index.ValidationChanged(nullptr, name);
          break;
      }
      ExpectSameCount(index, view,
                      "seed " + std::to_string(seed) + " step " + std::to_string(step));
      if (HasFatalFailure()) return;
    }
    // Everything gone: nothing left behind.
    for (int i = 0; i < 40; ++i) {
      const std::string name = "node-" + std::to_string(i);
      index.NodeChanged(nullptr, name);
      index.ValidationChanged(nullptr, name);
    }
    EXPECT_EQ(index.size(), 0u);
  }
}

TEST(NodeSupplyIndex, KnowsTheInstanceTypeOfANodeItsValidationNames) {
  NodeSupplyIndex index;
  const Json node{
      {"metadata",
       {{"name", "n1"}, {"labels", {{"node.kubernetes.io/instance-type", "p5.48xlarge"}}}}}};
  EXPECT_EQ(index.InstanceTypeOf("n1"), "");
  index.NodeChanged(&node, "n1");
  EXPECT_EQ(index.InstanceTypeOf("n1"), "p5.48xlarge");
  index.NodeChanged(nullptr, "n1");
  EXPECT_EQ(index.InstanceTypeOf("n1"), "");
}

TEST(WaitingKeys, WakesOnlyWhatTheChangedTypesCountCanRelease) {
  using controllers::JobKey;
  WaitingKeys<JobKey> waiting;
  const JobKey a{core::WorkloadKind::PyTorchJob, "ml", "a"};
  const JobKey b{core::WorkloadKind::PyTorchJob, "ml", "b"};
  waiting.Record(a, {{"p5.48xlarge", 16}});
  waiting.Record(b, {{"p5.48xlarge", 64}, {"p4d.24xlarge", 2}});
  EXPECT_TRUE(waiting.Releasable("p5.48xlarge", 15).empty()) << "neither is releasable yet";
  ASSERT_EQ(waiting.Releasable("p5.48xlarge", 16).size(), 1u);
  EXPECT_EQ(waiting.Releasable("p5.48xlarge", 16)[0].name, "a");
  EXPECT_EQ(waiting.Releasable("p5.48xlarge", 500).size(), 2u);
  ASSERT_EQ(waiting.Releasable("p4d.24xlarge", 2).size(), 1u);
  EXPECT_TRUE(waiting.Releasable("trn1.32xlarge", 1000).empty());
  EXPECT_FALSE(waiting.AnyWaitingFor("trn1.32xlarge"));
  // Released (no longer waiting), or waiting for another type now: forgotten where it was.
  waiting.Record(b, {});
  EXPECT_FALSE(waiting.AnyWaitingFor("p4d.24xlarge"));
  waiting.Record(a, {{"p4d.24xlarge", 1}});
  EXPECT_TRUE(waiting.Releasable("p5.48xlarge", 500).empty());
  EXPECT_EQ(waiting.size(), 1u);
}

}  // namespace
}  // namespace ncclguard::manager
