// The peer block of a NodeValidation (core/peer_status.h): what a probe publishes reads back the
// same, and a round judged from the members' blocks names the node at fault: a test nobody
// published passed, a block of another round says nothing of this one.
#include <gtest/gtest.h>

#include <set>

#include "core/peer_status.h"
#include "core/topology.h"

namespace ncclguard::core {
namespace {

PeerTestResult Failed(std::string peer, std::string_view pass, std::string_view tier,
                      int port = 0) {
  PeerTestResult test;
  test.peer = std::move(peer);
  test.pass = pass;
  test.tier = tier;
  test.result = "timed-out";
  test.failed_port = port;
  return test;
}

// A group's blocks for `round` where the nodes of `bad` drop every new connection they did not
// open (a host firewall): each client publishes its failed tests of both passes, as the probe
// does, and nothing when all passed.
std::vector<PeerMember> Round(const std::vector<std::string>& nodes,
                              const std::set<std::string>& bad, std::uint64_t round,
                              std::string_view tier = kPeerTierTcp) {
  std::vector<PeerMember> members;
  for (const std::string& node : nodes) members.push_back({node, {}});
  auto member = [&](const std::string& node) -> PeerBlock& {
    for (PeerMember& m : members) {
      if (m.node == node) return m.block;
    }
    throw std::logic_error(node);
  };
  auto run = [&](const std::vector<PeerPair>& pairs, std::string_view pass) {
    for (const PeerPair& pair : pairs) {
      if (!bad.contains(pair.server)) continue;
      PeerBlock& client = member(pair.client);
      client.round = round;
      client.tests.push_back(Failed(pair.server, pass, tier, 40123));
    }
  };
  run(RingPass(nodes, round), kPeerPassRing);
  run(CulpritPass(nodes, FirstPassOf(nodes, members, round), round), kPeerPassCulprit);
  return members;
}

TEST(PeerStatus, ABlockReadsBackAsItWasWritten) {
  PeerBlock block;
  block.path = "pod-network";
  block.address = "10.244.1.7";
  block.port_first = 32768;
  block.port_last = 60999;
  block.fabric_provider = "tcp;ofi_rxm";
  block.fabric_address = "0200a8c07f000001";
  block.period_seconds = 120;
  block.round = 14'760'000;
  block.tests = {Failed("ip-10-0-1-8", kPeerPassRing, kPeerTierTcp, 40123)};
  block.tests[0].ports = "29500,40123";
  block.tests[0].milliseconds = 2000.5;
  block.standing = kPeerUndecided;
  block.judged_round = 14'759'999;
  block.failed_with = {"ip-10-0-1-8"};
  block.failed_tier = kPeerTierTcp;
  block.failed_detail = "TCP from ip-10-0-1-7 to ip-10-0-1-8 port 40123 timed-out";
  block.message = "a test failed";
  const Json validation{{"status", {{"peer", PeerBlockJson(block)}}}};
  const auto read = PeerBlockOf(validation);
  ASSERT_TRUE(read);
  EXPECT_EQ(PeerBlockJson(*read), PeerBlockJson(block));
  EXPECT_EQ(read->tests[0].failed_port, 40123);
  EXPECT_FALSE(read->tests[0].passed);

  EXPECT_FALSE(PeerBlockOf(Json{{"status", {{"summary", "Pass"}}}}));
  EXPECT_FALSE(PeerBlockOf(Json{{"status", {{"peer", "garbage"}}}}));
  // Fields of the wrong type read as absent, never throw.
  const auto odd = PeerBlockOf(Json{{"status",
                                     {{"peer",
                                       {{"portRange", {"a", -1}},
                                        {"tests", {1, "x", {{"peer", 7}}}},
                                        {"round", -3},
                                        {"failedWith", {1, "n"}}}}}}});
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->port_first, 0);
  EXPECT_EQ(odd->round, 0u);
  EXPECT_EQ(odd->tests.size(), 1u);
  EXPECT_EQ(odd->failed_with, std::vector<std::string>{"n"});
}

TEST(PeerStatus, TwoNodesOneDroppingNewConnectionsAreBothUndecidedNamingTheOtherAndThePort) {
  const std::vector<std::string> nodes{"a", "b"};
  const auto members = Round(nodes, {"b"}, 7);
  for (const auto& [self, other] : {std::pair{"a", "b"}, std::pair{"b", "a"}}) {
    const PeerJudgement j = JudgeSelf(self, nodes, members, 7, true);
    EXPECT_EQ(j.standing, kPeerUndecided) << self;
    EXPECT_EQ(j.failed_with, std::vector<std::string>{other});
    EXPECT_EQ(j.failed_tier, kPeerTierTcp);
    EXPECT_EQ(j.failed_detail, "TCP from a to b port 40123 timed-out");
    EXPECT_FALSE(PeerStandingCounts(j.standing));
  }
  EXPECT_EQ(PeerFailureSlug(kPeerTierTcp), "host-firewall");
}

TEST(PeerStatus, TheNodeThatFailsWithGoodNodesIsTheOneUnreachableTheOthersReachable) {
  const std::vector<std::string> nodes{"n1", "n2", "n3", "n4", "n5", "n6"};
  for (std::uint64_t round = 100; round < 110; ++round) {
    SCOPED_TRACE(round);
    const auto members = Round(nodes, {"n4"}, round);
    for (const std::string& node : nodes) {
      const PeerJudgement j = JudgeSelf(node, nodes, members, round, true);
      if (node == "n4") {
        EXPECT_EQ(j.standing, kPeerUnreachable);
        EXPECT_FALSE(j.failed_with.empty());
        EXPECT_NE(j.message.find("port 40123"), std::string::npos) << j.message;
      } else {
        EXPECT_EQ(j.standing, kPeerReachable) << node << ": " << j.message;
        EXPECT_TRUE(j.failed_with.empty());
        EXPECT_TRUE(PeerStandingCounts(j.standing));
      }
    }
  }
}

TEST(PeerStatus, AFabricFailureWhileTcpPassesIsTheSecurityGroupsTier) {
  const std::vector<std::string> nodes{"a", "b", "c", "d"};
  const auto members = Round(nodes, {"c"}, 3, kPeerTierFabric);
  const PeerJudgement j = JudgeSelf("c", nodes, members, 3, true);
  EXPECT_EQ(j.standing, kPeerUnreachable);
  EXPECT_EQ(j.failed_tier, kPeerTierFabric);
  EXPECT_NE(j.failed_detail.find("while TCP passed"), std::string::npos) << j.failed_detail;
  EXPECT_EQ(PeerFailureSlug(j.failed_tier), "security-group");
}

TEST(PeerStatus, AnotherRoundsFailuresSayNothingOfThisOneAndAGroupOfOneIsAlone) {
  const std::vector<std::string> nodes{"a", "b", "c"};
  const auto old = Round(nodes, {"b"}, 41);
  for (const std::string& node : nodes) {
    EXPECT_EQ(JudgeSelf(node, nodes, old, 42, true).standing, kPeerReachable) << node;
  }
  EXPECT_EQ(JudgeSelf("a", nodes, old, 42, false).standing, kPeerUntested);
  const std::vector<std::string> one{"a"};
  const std::vector<PeerMember> alone{{"a", {}}};
  const PeerJudgement j = JudgeSelf("a", one, alone, 42, false);
  EXPECT_EQ(j.standing, kPeerAlone);
  EXPECT_TRUE(PeerStandingCounts(j.standing));
  EXPECT_TRUE(PeerStandingCounts(""));  // no peer checks: counted as before them
  EXPECT_FALSE(PeerStandingCounts(kPeerUntested));
}

// Nodes of one network block test each other: the block is the highest network-node-layer label
// a node carries (three layers on p5, four on p6-b200), and the group a label value.
TEST(PeerStatus, TheGroupIsTheInstanceTypeAndTheClosestNetworkBlock) {
  const Json p5{{"topology.k8s.aws/network-node-layer-1", "nn-1111"},
                {"topology.k8s.aws/network-node-layer-2", "nn-2222"},
                {"topology.k8s.aws/network-node-layer-3", "nn-3333"},
                {"node.kubernetes.io/instance-type", "p5.48xlarge"}};
  EXPECT_EQ(ClosestNetworkBlock(p5), "nn-3333");
  Json b200 = p5;
  b200["topology.k8s.aws/network-node-layer-4"] = "nn-4444";
  b200["topology.k8s.aws/network-node-layer-10x"] = "not a layer";
  EXPECT_EQ(ClosestNetworkBlock(b200), "nn-4444");
  EXPECT_EQ(ClosestNetworkBlock(Json::object()), "");
  EXPECT_EQ(ClosestNetworkBlock(Json("labels")), "");

  EXPECT_EQ(PeerGroupOf("p5.48xlarge", "nn-3333"), "p5.48xlarge_nn-3333");
  EXPECT_EQ(PeerGroupOf("ml.p5.48xlarge", ""), "ml.p5.48xlarge");
  EXPECT_EQ(PeerGroupOf("", ""), "none");
  // Too long or not starting and ending with an alphanumeric: a hash, the same for the same input.
  const std::string long_block(80, 'x');
  const std::string hashed = PeerGroupOf("p5.48xlarge", long_block);
  EXPECT_EQ(hashed.size(), 18u);
  EXPECT_EQ(hashed.substr(0, 2), "g-");
  EXPECT_EQ(hashed, PeerGroupOf("p5.48xlarge", long_block));
  EXPECT_NE(hashed, PeerGroupOf("p5.48xlarge", long_block + "y"));
  EXPECT_EQ(PeerGroupOf("p5 48", "a/b"), "p5_48_a_b");
}

}  // namespace
}  // namespace ncclguard::core
