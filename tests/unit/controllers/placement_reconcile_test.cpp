// The training-job reconciler's NcclPlacement condition (docs/operator.md, "Placement"): set once
// the job's pods are bound, with an Event when it changes and none on a stable state.
#include <gtest/gtest.h>

#include <algorithm>

#include "controllers/conditions.h"
#include "controllers/training_job_reconciler.h"
#include "core/contract.h"
#include "tests/unit/controllers/fake_cluster.h"

namespace ncclguard::test {
namespace {

using core::WorkloadKind;

const controllers::Timestamp kPlaceNow =
    std::chrono::sys_days(std::chrono::year(2026) / 12 / 7) + std::chrono::hours(15);
const JobKey kPlaceKey{WorkloadKind::PyTorchJob, "team-a", "llama"};

void PlaceLabel(FakeCluster& cluster, const std::string& node, const std::string& layer3) {
  Json& labels = cluster.NodeObject(node)["metadata"]["labels"];
  labels["topology.k8s.aws/network-node-layer-1"] = "nn-top";
  labels["topology.k8s.aws/network-node-layer-2"] = "nn-mid";
  labels["topology.k8s.aws/network-node-layer-3"] = layer3;
}

Json PlacePod(const std::string& name, const std::string& role, int index,
              const std::string& node) {
  Json pod =
      KubeflowPod("team-a", "llama", name, {{"phase", node.empty() ? "Pending" : "Running"}}, node);
  pod["metadata"]["labels"]["training.kubeflow.org/replica-type"] = role;
  pod["metadata"]["labels"]["training.kubeflow.org/replica-index"] = std::to_string(index);
  return pod;
}

// Reconciles and applies until nothing more is asked; returns the rounds that asked something.
int PlaceSettle(FakeCluster& cluster) {
  int rounds = 0;
  for (int i = 0; i < 6; ++i) {
    const auto result = controllers::ReconcileTrainingJob(kPlaceKey, cluster, kPlaceNow);
    if (result.actions.empty()) return rounds;
    EXPECT_EQ(cluster.Apply(result.actions), 0);
    ++rounds;
  }
  ADD_FAILURE() << "the reconcile never settled";
  return rounds;
}

std::size_t PlaceEvents(const FakeCluster& cluster, const std::string& reason) {
  return static_cast<std::size_t>(
      std::count_if(cluster.events().begin(), cluster.events().end(),
                    [&](const Json& e) { return e.value("reason", "") == reason; }));
}

std::optional<controllers::Condition> PlaceCondition(FakeCluster& cluster) {
  return controllers::FindCondition(cluster.JobObject(kPlaceKey), core::kPlacementCondition);
}

TEST(ReconcilePlacement, SpreadPodsGetTheConditionAndOneEventThenOneBlockOnceRelabelled) {
  FakeCluster cluster;
  cluster.AddNamespace("team-a", true);
  for (const char* node : {"n0", "n1", "n2"}) cluster.AddNode(node, "p5.48xlarge", "Pass");
  PlaceLabel(cluster, "n0", "nn-a");
  PlaceLabel(cluster, "n1", "nn-b");
  PlaceLabel(cluster, "n2", "nn-a");
  cluster.AddJob(P5PyTorchJob("team-a", "llama", 2, false));
  cluster.AddPod(PlacePod("llama-master-0", "master", 0, "n0"));
  cluster.AddPod(PlacePod("llama-worker-0", "worker", 0, "n1"));
  cluster.AddPod(PlacePod("llama-worker-1", "worker", 1, ""));  // not scheduled yet

  PlaceSettle(cluster);
  EXPECT_FALSE(PlaceCondition(cluster)) << "judged before every pod is bound";

  cluster.PodObject("team-a", "llama-worker-1")["spec"]["nodeName"] = "n2";
  cluster.PodObject("team-a", "llama-worker-1")["status"]["phase"] = "Running";
  PlaceSettle(cluster);
  auto condition = PlaceCondition(cluster);
  ASSERT_TRUE(condition);
  EXPECT_EQ(condition->status, "False");
  EXPECT_EQ(condition->reason, "Spread");
  EXPECT_EQ(condition->message.find("3 pods on 3 nodes in 2 network-node-layer-3 blocks: nn-a 2 "
                                    "nodes, nn-b 1 node (one network-node-layer-2 block, nn-mid); "
                                    "rank order interleaves blocks: ranks 0 nn-a, 1 nn-b, 2 nn-a"),
            0u)
      << condition->message;
  EXPECT_NE(condition->message.find("#advanced-tuning"), std::string::npos);
  EXPECT_EQ(PlaceEvents(cluster, "Spread"), 1u);

  // Stable: nothing more is written or said.
  EXPECT_TRUE(controllers::ReconcileTrainingJob(kPlaceKey, cluster, kPlaceNow).actions.empty());
  EXPECT_EQ(PlaceEvents(cluster, "Spread"), 1u);

  // n1 relabelled into nn-a: the next reconcile of the job (a pod change wakes it) says so.
  PlaceLabel(cluster, "n1", "nn-a");
  PlaceSettle(cluster);
  condition = PlaceCondition(cluster);
  ASSERT_TRUE(condition);
  EXPECT_EQ(condition->status, "True");
  EXPECT_EQ(condition->reason, "OneBlock");
  EXPECT_EQ(condition->message, "3 pods on 3 nodes in one network-node-layer-3 block nn-a");
  EXPECT_EQ(PlaceEvents(cluster, "OneBlock"), 1u);
  EXPECT_EQ(PlaceSettle(cluster), 0);
  EXPECT_EQ(PlaceEvents(cluster, "OneBlock"), 1u);
}

TEST(ReconcilePlacement, NodesWithoutTopologyLabelsAreUnknownWithoutAnEvent) {
  FakeCluster cluster;
  cluster.AddNamespace("team-a", true);
  cluster.AddNode("n0", "p5.48xlarge", "Pass");
  cluster.AddNode("n1", "p5.48xlarge", "Pass");
  cluster.AddJob(P5PyTorchJob("team-a", "llama", 1, false));
  cluster.AddPod(PlacePod("llama-master-0", "master", 0, "n0"));
  cluster.AddPod(PlacePod("llama-worker-0", "worker", 0, "n1"));
  PlaceSettle(cluster);
  const auto condition = PlaceCondition(cluster);
  ASSERT_TRUE(condition);
  EXPECT_EQ(condition->status, "Unknown");
  EXPECT_EQ(condition->reason, "NoTopologyLabels");
  EXPECT_EQ(PlaceEvents(cluster, "NoTopologyLabels"), 0u);
  EXPECT_EQ(PlaceSettle(cluster), 0);
}

// Finished pods and an MPIJob-style rankless pod are not placed; a job with none running keeps
// what it said.
TEST(ReconcilePlacement, FinishedPodsDoNotMoveIt) {
  FakeCluster cluster;
  cluster.AddNamespace("team-a", true);
  cluster.AddNode("n0", "p5.48xlarge", "Pass");
  cluster.AddNode("n1", "p5.48xlarge", "Pass");
  PlaceLabel(cluster, "n0", "nn-a");
  PlaceLabel(cluster, "n1", "nn-b");
  cluster.AddJob(P5PyTorchJob("team-a", "llama", 1, false));
  cluster.AddPod(PlacePod("llama-master-0", "master", 0, "n0"));
  cluster.AddPod(PlacePod("llama-worker-0", "worker", 0, "n1"));
  cluster.PodObject("team-a", "llama-worker-0")["status"]["phase"] = "Succeeded";
  PlaceSettle(cluster);
  auto condition = PlaceCondition(cluster);
  ASSERT_TRUE(condition);
  EXPECT_EQ(condition->reason, "OneBlock");
  cluster.PodObject("team-a", "llama-master-0")["status"]["phase"] = "Succeeded";
  PlaceSettle(cluster);
  EXPECT_EQ(PlaceCondition(cluster)->reason, "OneBlock");
}

// NcclPolicy spec.placement required (here by the namespace's label): the gate holds a job until
// one network block has its validated nodes, and says how many the largest block has.
TEST(ReconcilePlacement, RequiredPlacementHoldsTheJobUntilOneBlockHasItsValidatedNodes) {
  FakeCluster cluster;
  cluster.AddNamespace("team-a", true);
  cluster.LabelNamespace("team-a", std::string(core::kPlacementNamespaceLabel), "required");
  for (const char* node : {"n0", "n1", "n2", "n3"}) cluster.AddNode(node, "p5.48xlarge", "Pass");
  PlaceLabel(cluster, "n0", "nn-a");
  PlaceLabel(cluster, "n1", "nn-a");
  PlaceLabel(cluster, "n2", "nn-a");
  PlaceLabel(cluster, "n3", "nn-b");
  cluster.AddJob(P5PyTorchJob("team-a", "llama", 3));  // 4 pods x 8 GPUs: 4 nodes
  PlaceSettle(cluster);
  auto preflight =
      controllers::FindCondition(cluster.JobObject(kPlaceKey), core::kPreflightCondition);
  ASSERT_TRUE(preflight);
  EXPECT_EQ(preflight->status, "False");
  EXPECT_EQ(preflight->reason, "InsufficientValidatedNodes");
  EXPECT_EQ(preflight->message.find("4 validated p5.48xlarge nodes, at most 3 in one "
                                    "network-node-layer-3 block, 4 needed in one (NcclPolicy "
                                    "spec.placement required)"),
            0u)
      << preflight->message;
  EXPECT_NE(preflight->message.find("#advanced-tuning"), std::string::npos);

  // The fourth node joins nn-a: released, the block named.
  PlaceLabel(cluster, "n3", "nn-a");
  PlaceSettle(cluster);
  preflight = controllers::FindCondition(cluster.JobObject(kPlaceKey), core::kPreflightCondition);
  ASSERT_TRUE(preflight);
  EXPECT_EQ(preflight->status, "True") << preflight->message;
  EXPECT_EQ(preflight->message,
            "4 validated p5.48xlarge nodes for 4 needed, 4 in network-node-layer-3 nn-a");

  // Preferred (the default): four validated nodes in two blocks release it.
  FakeCluster preferred;
  preferred.AddNamespace("team-a", true);
  for (const char* node : {"n0", "n1", "n2", "n3"}) preferred.AddNode(node, "p5.48xlarge", "Pass");
  PlaceLabel(preferred, "n3", "nn-b");
  preferred.AddJob(P5PyTorchJob("team-a", "llama", 3));
  PlaceSettle(preferred);
  EXPECT_EQ(
      controllers::FindCondition(preferred.JobObject(kPlaceKey), core::kPreflightCondition)->status,
      "True");
}

}  // namespace
}  // namespace ncclguard::test
