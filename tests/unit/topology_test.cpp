// A node's place in the network (core/topology.h) and where a job's bound pods landed in it
// (core/placement.h): the NcclPlacement condition's words.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/placement.h"
#include "core/topology.h"

namespace ncclguard::core {
namespace {

// A node's labels at `blocks.size()` layers, layer 1 first.
Json TopoLabels(const std::vector<std::string>& blocks, const std::string& ultraserver = "") {
  Json labels{{"node.kubernetes.io/instance-type", "p5.48xlarge"}};
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    labels[NetworkLayerLabel(static_cast<int>(i) + 1)] = blocks[i];
  }
  if (!ultraserver.empty()) labels[std::string(kUltraServerLabel)] = ultraserver;
  return labels;
}

TEST(Topology, ReadsEveryLayerInOrderAndTheDeepestAtThreeAndFourLayers) {
  const NodeTopology p5 = ReadNodeTopology(TopoLabels({"nn-1", "nn-2", "nn-3"}));
  ASSERT_EQ(p5.levels.size(), 3u);
  EXPECT_EQ(p5.levels[0].label, "topology.k8s.aws/network-node-layer-1");
  EXPECT_EQ(p5.Deepest()->layer, 3);
  EXPECT_EQ(p5.Deepest()->block, "nn-3");
  EXPECT_EQ(p5.At(2)->block, "nn-2");
  EXPECT_EQ(p5.At(4), nullptr);
  EXPECT_TRUE(p5.ultraserver.empty());

  Json b200 = TopoLabels({"nn-1", "nn-2", "nn-3", "nn-4"}, "us-7");
  b200["topology.k8s.aws/network-node-layer-10x"] = "not a layer";
  b200["topology.k8s.aws/network-node-layer-0"] = "not a layer";
  b200["topology.k8s.aws/network-node-layer-05"] = "not a layer";
  b200["topology.k8s.aws/network-node-layer-"] = "not a layer";
  b200["topology.k8s.aws/network-node-layer-17"] = "beyond the deepest read";
  const NodeTopology deep = ReadNodeTopology(b200);
  ASSERT_EQ(deep.levels.size(), 4u);
  EXPECT_EQ(deep.Deepest()->layer, 4);
  EXPECT_EQ(deep.Deepest()->label, "topology.k8s.aws/network-node-layer-4");
  EXPECT_EQ(deep.ultraserver, "us-7");
  EXPECT_EQ(ClosestNetworkBlock(b200), "nn-4");
  EXPECT_EQ(NetworkLayerName(4), "network-node-layer-4");
}

TEST(Topology, ANodeWithoutLabelsOrWithUnreadableOnesHasNone) {
  EXPECT_FALSE(ReadNodeTopology(Json::object()).Labelled());
  EXPECT_FALSE(ReadNodeTopology(Json("labels")).Labelled());
  EXPECT_FALSE(ReadNodeTopology(Json{{"topology.k8s.aws/network-node-layer-1", 5},
                                     {"topology.k8s.aws/network-node-layer-2", ""}})
                   .Labelled());
  EXPECT_EQ(ReadNodeTopology(Json::object()).Deepest(), nullptr);
  EXPECT_EQ(ClosestNetworkBlock(Json::object()), "");
  // An UltraServer id alone: labelled, with no layer.
  const NodeTopology ultra = ReadNodeTopology(Json{{std::string(kUltraServerLabel), "us-1"}});
  EXPECT_TRUE(ultra.Labelled());
  EXPECT_EQ(ultra.Deepest(), nullptr);
}

// The nodes of a placement test: name -> labels.
using TopoNodes = std::map<std::string, Json, std::less<>>;

Placement TopoJudge(const std::vector<PlacedPod>& pods, const TopoNodes& nodes) {
  return JudgePlacement(pods, [&nodes](std::string_view name) {
    const auto it = nodes.find(name);
    return ReadNodeTopology(it == nodes.end() ? Json::object() : it->second);
  });
}

// `per_node` pods on each node, named and ranked in order.
std::vector<PlacedPod> TopoPods(const std::vector<std::string>& nodes, int per_node,
                                bool ranked = false) {
  std::vector<PlacedPod> pods;
  for (const std::string& node : nodes) {
    for (int i = 0; i < per_node; ++i) {
      const long rank = static_cast<long>(pods.size());
      pods.push_back({"pod-" + std::to_string(rank), node,
                      ranked ? std::optional<RankKey>(RankKey{1, 0, rank}) : std::nullopt});
    }
  }
  return pods;
}

TEST(Placement, PodsInOneBlockAtTheDeepestLayerAreOneBlock) {
  const TopoNodes nodes{{"n1", TopoLabels({"a", "b", "nn-a"})},
                        {"n2", TopoLabels({"a", "b", "nn-a"})}};
  const Placement p = TopoJudge(TopoPods({"n1", "n2"}, 4), nodes);
  EXPECT_EQ(p.verdict, PlacementVerdict::OneBlock);
  EXPECT_EQ(p.reason, "OneBlock");
  EXPECT_EQ(p.layer, 3);
  EXPECT_EQ(p.message, "8 pods on 2 nodes in one network-node-layer-3 block nn-a");
}

TEST(Placement, PodsInTwoBlocksAreSpreadAndTheBiggestBlockComesFirst) {
  const TopoNodes nodes{{"n1", TopoLabels({"x", "y", "nn-b"})},
                        {"n2", TopoLabels({"x", "y", "nn-a"})},
                        {"n3", TopoLabels({"x", "y", "nn-a"})},
                        {"n4", TopoLabels({"x", "y", "nn-a"})}};
  const Placement p = TopoJudge(TopoPods({"n1", "n2", "n3", "n4"}, 4), nodes);
  EXPECT_EQ(p.verdict, PlacementVerdict::Spread);
  EXPECT_EQ(p.reason, "Spread");
  EXPECT_EQ(p.blocks, 2u);
  EXPECT_EQ(p.nodes, 4u);
  EXPECT_EQ(p.message,
            "16 pods on 4 nodes in 2 network-node-layer-3 blocks: nn-a 3 nodes, nn-b 1 node (one "
            "network-node-layer-2 block, y)");
  EXPECT_FALSE(p.interleaved);  // no rank known
}

TEST(Placement, FourLayersAreJudgedAtTheFourthAndUltraServersNamed) {
  const TopoNodes nodes{{"n1", TopoLabels({"a", "b", "c", "d1"}, "us-1")},
                        {"n2", TopoLabels({"a", "b", "c", "d2"}, "us-2")}};
  const Placement p = TopoJudge(TopoPods({"n1", "n2"}, 1), nodes);
  EXPECT_EQ(p.layer, 4);
  EXPECT_EQ(p.message,
            "2 pods on 2 nodes in 2 network-node-layer-4 blocks: d1 1 node, d2 1 node (one "
            "network-node-layer-3 block, c), across 2 UltraServers");
  const TopoNodes one{{"n1", TopoLabels({"a", "b", "c", "d1"}, "us-1")}};
  EXPECT_EQ(TopoJudge(TopoPods({"n1"}, 2), one).message,
            "2 pods on 1 node in one network-node-layer-4 block d1, in one UltraServer us-1");
}

// A node of a type missing its deepest level: judged at the deepest level every node carries.
TEST(Placement, ANodeMissingALevelIsJudgedAtTheLevelsAllShare) {
  const TopoNodes nodes{{"n1", TopoLabels({"a", "b", "c1"})}, {"n2", TopoLabels({"a", "b"})}};
  const Placement p = TopoJudge(TopoPods({"n1", "n2"}, 1), nodes);
  EXPECT_EQ(p.verdict, PlacementVerdict::OneBlock);
  EXPECT_EQ(p.layer, 2);
  EXPECT_EQ(p.message, "2 pods on 2 nodes in one network-node-layer-2 block b");
}

TEST(Placement, NodesWithoutTopologyLabelsLeaveItUnknown) {
  const TopoNodes bare{{"n1", Json::object()}};
  const Placement none = TopoJudge(TopoPods({"n1", "n2"}, 2), bare);
  EXPECT_EQ(none.verdict, PlacementVerdict::NoTopologyLabels);
  EXPECT_EQ(none.reason, "NoTopologyLabels");
  EXPECT_EQ(none.message,
            "4 pods on 2 nodes; no node carries a topology.k8s.aws/network-node-layer-N label (EKS "
            "and SageMaker HyperPod set them), so the network blocks they span are not known");
  const TopoNodes some{{"n1", TopoLabels({"a", "b", "c"})}};
  const Placement partly = TopoJudge(TopoPods({"n1", "n2"}, 1), some);
  EXPECT_EQ(partly.verdict, PlacementVerdict::NoTopologyLabels);
  EXPECT_NE(partly.message.find("1 node carries no topology.k8s.aws/network-node-layer-N label "
                                "(n2)"),
            std::string::npos)
      << partly.message;
}

TEST(Placement, RanksThatLeaveABlockAndComeBackAreSaidToInterleave) {
  const TopoNodes nodes{{"n1", TopoLabels({"x", "y", "nn-a"})},
                        {"n2", TopoLabels({"x", "y", "nn-b"})},
                        {"n3", TopoLabels({"x", "y", "nn-a"})}};
  const Placement interleaved = TopoJudge(TopoPods({"n1", "n2", "n3"}, 2, true), nodes);
  EXPECT_TRUE(interleaved.interleaved);
  EXPECT_NE(interleaved.message.find("; rank order interleaves blocks: ranks 0-1 nn-a, 2-3 nn-b, "
                                     "4-5 nn-a"),
            std::string::npos)
      << interleaved.message;
  // The same pods, consecutive ranks per block: not interleaved.
  const Placement packed = TopoJudge(TopoPods({"n1", "n3", "n2"}, 2, true), nodes);
  EXPECT_EQ(packed.verdict, PlacementVerdict::Spread);
  EXPECT_FALSE(packed.interleaved);
  EXPECT_EQ(packed.message.find("interleaves"), std::string::npos);
}

TEST(Placement, RankKeysComeFromEachOperatorsIndexLabels) {
  const std::array<std::string_view, 2> roles{"master", "worker"};
  EXPECT_EQ(RankKeyOf(Json{{"training.kubeflow.org/replica-type", "master"},
                           {"training.kubeflow.org/replica-index", "0"}},
                      roles),
            (RankKey{0, 0, 0}));
  const auto worker = RankKeyOf(Json{{"training.kubeflow.org/replica-type", "worker"},
                                     {"training.kubeflow.org/replica-index", "3"}},
                                roles);
  EXPECT_EQ(worker, (RankKey{1, 0, 3}));
  EXPECT_LT(*RankKeyOf(Json{{"training.kubeflow.org/replica-type", "master"},
                            {"training.kubeflow.org/replica-index", "0"}},
                       roles),
            *worker);
  EXPECT_EQ(RankKeyOf(Json{{"jobset.sigs.k8s.io/job-index", "2"},
                           {"batch.kubernetes.io/job-completion-index", "1"}},
                      {}),
            (RankKey{0, 2, 1}));
  EXPECT_EQ(RankKeyOf(Json{{"jobset.sigs.k8s.io/job-global-index", "5"},
                           {"jobset.sigs.k8s.io/job-index", "2"},
                           {"batch.kubernetes.io/job-completion-index", "0"}},
                      {}),
            (RankKey{0, 5, 0}));
  EXPECT_EQ(RankKeyOf(Json{{"batch.kubernetes.io/job-completion-index", "7"}}, {}),
            (RankKey{0, 0, 7}));
  EXPECT_FALSE(RankKeyOf(Json{{"batch.kubernetes.io/job-completion-index", "x"}}, {}));
  EXPECT_FALSE(RankKeyOf(Json{{"batch.kubernetes.io/job-completion-index", "-1"}}, {}));
  EXPECT_FALSE(RankKeyOf(Json::object(), {}));
  EXPECT_FALSE(RankKeyOf(Json("labels"), {}));
}

// 1,000 pods over 200 blocks, ranks scattered: the message names a few blocks and runs, and
// stays short.
TEST(Placement, AThousandPodsOverTwoHundredBlocksGiveABoundedMessage) {
  TopoNodes nodes;
  std::vector<PlacedPod> pods;
  for (int n = 0; n < 250; ++n) {
    nodes.emplace("node-" + std::to_string(n),
                  TopoLabels({"x", "y", "nn-" + std::to_string(n % 200)}));
  }
  for (long rank = 0; rank < 1000; ++rank) {
    pods.push_back({"pod-" + std::to_string(rank), "node-" + std::to_string((rank * 7) % 250),
                    RankKey{0, 0, rank}});
  }
  const Placement p = TopoJudge(pods, nodes);
  EXPECT_EQ(p.verdict, PlacementVerdict::Spread);
  EXPECT_EQ(p.blocks, 200u);
  EXPECT_TRUE(p.interleaved);
  EXPECT_LT(p.message.size(), 600u) << p.message;
  EXPECT_EQ(p.message.find("1000 pods on 250 nodes in 200 network-node-layer-3 blocks: "), 0u)
      << p.message;
  EXPECT_NE(p.message.find(", and 196 more"), std::string::npos) << p.message;
  EXPECT_NE(p.message.find("more runs"), std::string::npos) << p.message;
}

// Property: whatever the pods and labels, one block <=> OneBlock, and the counts add up.
TEST(Placement, OneBlockExactlyWhenTheDeepestSharedLayerHasOneBlock) {
  for (unsigned seed = 1; seed < 300; ++seed) {
    unsigned state = seed;
    const auto next = [&state](unsigned bound) {
      state = state * 1103515245u + 12345u;
      return (state >> 16) % bound;
    };
    TopoNodes nodes;
    const unsigned node_count = 1 + next(6);
    for (unsigned n = 0; n < node_count; ++n) {
      std::vector<std::string> blocks;
      const unsigned depth = 3 + next(2);
      for (unsigned layer = 1; layer <= depth; ++layer) {
        blocks.push_back("L" + std::to_string(layer) + "-" + std::to_string(next(2)));
      }
      nodes.emplace("n" + std::to_string(n), TopoLabels(blocks));
    }
    std::vector<PlacedPod> pods;
    const unsigned pod_count = 1 + next(12);
    for (unsigned i = 0; i < pod_count; ++i) {
      pods.push_back({"p" + std::to_string(i), "n" + std::to_string(next(node_count)),
                      RankKey{0, 0, static_cast<long>(i)}});
    }
    const Placement p = TopoJudge(pods, nodes);
    ASSERT_GE(p.layer, 3) << seed;
    std::set<std::string> blocks;
    for (const PlacedPod& pod : pods) {
      blocks.insert(ReadNodeTopology(nodes.at(pod.node)).At(p.layer)->block);
    }
    EXPECT_EQ(p.blocks, blocks.size()) << seed;
    EXPECT_EQ(p.verdict == PlacementVerdict::OneBlock, blocks.size() == 1) << seed;
    EXPECT_FALSE(p.interleaved && blocks.size() == 1) << seed;
  }
}

}  // namespace
}  // namespace ncclguard::core
