// The peer-check plan (core/peer_plan.h): the ring's cost and coverage, and the culprit search
// over simulated faults, from 2 nodes to 5,000.
#include "core/peer_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

namespace ncclguard::test {
namespace {

using core::PeerOutcome;
using core::PeerPair;
using core::PeerStanding;
using core::PeerVerdict;

std::vector<std::string> Nodes(std::size_t n) {
  std::vector<std::string> nodes;
  for (std::size_t i = 0; i < n; ++i) nodes.push_back("node-" + std::to_string(10000 + i));
  return nodes;
}

// A cluster's faults: nodes every test with fails, nodes that take no new inbound connection
// (a host firewall's INPUT rule: their own outbound tests pass), and pairs that fail together.
struct Faults {
  std::set<std::string> dead;
  std::set<std::string> inbound_dropped;
  std::set<std::pair<std::string, std::string>> pairs;  // (lower, higher)

  bool Passes(const PeerPair& p) const {
    if (dead.contains(p.client) || dead.contains(p.server)) return false;
    if (inbound_dropped.contains(p.server)) return false;
    return !pairs.contains(std::minmax(p.client, p.server));
  }
  std::vector<PeerOutcome> Run(const std::vector<PeerPair>& plan) const {
    std::vector<PeerOutcome> outcomes;
    for (const PeerPair& p : plan) outcomes.push_back({p.client, p.server, Passes(p)});
    return outcomes;
  }
};

struct Round {
  std::vector<PeerOutcome> first;
  std::vector<PeerOutcome> second;
  std::vector<PeerVerdict> verdicts;
};

Round RunRound(const std::vector<std::string>& nodes, const Faults& faults, std::uint64_t round) {
  Round r;
  r.first = faults.Run(core::RingPass(nodes, round));
  r.second = faults.Run(core::CulpritPass(nodes, r.first, round));
  r.verdicts = core::JudgePeers(nodes, r.first, r.second);
  return r;
}

std::set<std::string> With(const std::vector<PeerVerdict>& verdicts, PeerStanding standing) {
  std::set<std::string> out;
  for (const PeerVerdict& v : verdicts) {
    if (v.standing == standing) out.insert(v.node);
  }
  return out;
}

TEST(PeerPlan, TheRingCostsOneTestANodeAndCoversEveryPairWithinNMinusOneRounds) {
  EXPECT_TRUE(core::RingPass(Nodes(0), 3).empty());
  EXPECT_TRUE(core::RingPass(Nodes(1), 3).empty());
  const auto nodes = Nodes(2);
  EXPECT_EQ(core::RingPass(nodes, 7),
            (std::vector<PeerPair>{{nodes[0], nodes[1]}, {nodes[1], nodes[0]}}));

  for (const std::size_t n : {3u, 7u, 16u, 64u}) {
    const auto group = Nodes(n);
    std::set<std::pair<std::string, std::string>> covered;
    for (std::uint64_t round = 0; round + 1 < n; ++round) {
      const auto plan = core::RingPass(group, round);
      ASSERT_EQ(plan.size(), n);
      std::map<std::string, int> client, server;
      for (const PeerPair& p : plan) {
        EXPECT_NE(p.client, p.server);
        ++client[p.client];
        ++server[p.server];
        covered.insert({p.client, p.server});
      }
      for (const std::string& node : group) {
        EXPECT_EQ(client[node], 1) << node;
        EXPECT_EQ(server[node], 1) << node;
      }
      // Every probe computes the same plan from the same inputs.
      EXPECT_EQ(plan, core::RingPass(group, round));
    }
    EXPECT_EQ(covered.size(), n * (n - 1)) << n << " nodes";
  }
}

TEST(PeerPlan, AHealthyGroupNeedsNoSecondPassAndEveryNodeIsReachable) {
  const auto nodes = Nodes(50);
  const Round r = RunRound(nodes, {}, 4);
  EXPECT_TRUE(r.second.empty());
  EXPECT_EQ(With(r.verdicts, PeerStanding::kReachable).size(), 50u);
}

TEST(PeerPlan, ANodeEveryPeerFailsIsNamedAndItsPartnersAreNot) {
  const auto nodes = Nodes(10);
  Faults faults;
  faults.dead.insert(nodes[4]);
  const Round r = RunRound(nodes, faults, 0);
  EXPECT_EQ(With(r.verdicts, PeerStanding::kUnreachable), std::set<std::string>{nodes[4]});
  EXPECT_EQ(With(r.verdicts, PeerStanding::kReachable).size(), 9u);
  const PeerVerdict& dead = r.verdicts[4];
  EXPECT_EQ(dead.failed_with, (std::vector<std::string>{nodes[3], nodes[5]}));
  // Its two partners in the ring and two good witnesses each, both ways: 3 suspects x 2 x 2.
  EXPECT_EQ(r.second.size(), 12u);
}

TEST(PeerPlan, AFirewallThatDropsOnlyInboundConnectionsIsFoundFromBothDirections) {
  const auto nodes = Nodes(10);
  Faults faults;
  faults.inbound_dropped.insert(nodes[7]);
  const Round r = RunRound(nodes, faults, 2);
  EXPECT_EQ(With(r.verdicts, PeerStanding::kUnreachable), std::set<std::string>{nodes[7]});
}

TEST(PeerPlan, AFaultOfOnePairNamesEachOtherNotEitherNode) {
  const auto nodes = Nodes(10);
  Faults faults;
  faults.pairs.insert(std::minmax(nodes[2], nodes[3]));  // the ring of round 0 pairs them
  const Round r = RunRound(nodes, faults, 0);
  EXPECT_TRUE(With(r.verdicts, PeerStanding::kUnreachable).empty());
  EXPECT_EQ(With(r.verdicts, PeerStanding::kPairFault),
            (std::set<std::string>{nodes[2], nodes[3]}));
  EXPECT_EQ(r.verdicts[2].failed_with, std::vector<std::string>{nodes[3]});
  EXPECT_EQ(r.verdicts[3].failed_with, std::vector<std::string>{nodes[2]});
}

TEST(PeerPlan, WithoutAGoodNodeNothingIsGuessed) {
  const auto nodes = Nodes(2);
  Faults faults;
  faults.pairs.insert(std::minmax(nodes[0], nodes[1]));
  const Round r = RunRound(nodes, faults, 0);
  EXPECT_TRUE(r.second.empty());
  EXPECT_EQ(With(r.verdicts, PeerStanding::kUndecided),
            (std::set<std::string>{nodes[0], nodes[1]}));
  EXPECT_EQ(r.verdicts[0].failed_with, std::vector<std::string>{nodes[1]});
}

TEST(PeerPlan, ATestThatNeverRanCountsNeitherWay) {
  const auto nodes = Nodes(6);
  Faults faults;
  faults.dead.insert(nodes[1]);
  Round r;
  r.first = faults.Run(core::RingPass(nodes, 0));
  r.first.erase(r.first.begin());  // node 0's test of node 1: node 0 went away mid-round
  r.second = faults.Run(core::CulpritPass(nodes, r.first, 0));
  r.verdicts = core::JudgePeers(nodes, r.first, r.second);
  EXPECT_EQ(With(r.verdicts, PeerStanding::kUnreachable), std::set<std::string>{nodes[1]});
}

// The scale: 5,000 nodes with random faults, one round. Every dead node and every node
// with a dropping firewall is named, no healthy node is, and the round costs O(n) tests.
TEST(PeerPlan, AtFiveThousandNodesOneRoundNamesEveryBadNodeAndNoGoodOne) {
  const auto nodes = Nodes(5000);
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    std::mt19937_64 random(seed);
    Faults faults;
    std::set<std::string> bad;
    for (const std::string& node : nodes) {
      const auto draw = random() % 1000;
      if (draw < 10) {
        faults.dead.insert(node);
        bad.insert(node);
      } else if (draw < 20) {
        faults.inbound_dropped.insert(node);
        bad.insert(node);
      }
    }
    const Round r = RunRound(nodes, faults, seed);
    EXPECT_EQ(With(r.verdicts, PeerStanding::kUnreachable), bad) << "seed " << seed;
    EXPECT_TRUE(With(r.verdicts, PeerStanding::kPairFault).empty()) << "seed " << seed;
    EXPECT_TRUE(With(r.verdicts, PeerStanding::kUndecided).empty()) << "seed " << seed;
    EXPECT_EQ(r.first.size(), nodes.size());
    // Each bad node makes at most three suspects (itself and its two ring partners), each tested
    // four times.
    EXPECT_LE(r.second.size(), bad.size() * 3 * 4) << "seed " << seed;
  }
}

}  // namespace
}  // namespace ncclguard::test
