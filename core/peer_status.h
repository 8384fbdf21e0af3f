// What a probe publishes of the checks between nodes (docs/contract.md, "NodeValidation",
// status.peer), and how every probe of a group reads the same round from what the others
// published (core/peer_plan.h plans the round). Pure: the probe runs the tests and writes the
// block; the controller's gate reads the verdict.
//
// A probe writes its block when something in it changes, not every round: its address at start,
// its tests of a round where one failed (the others need the failures to plan the second pass),
// and its verdict when the verdict changes, with the tests of the round it judged. A test a client
// did not publish for a round passed, so a healthy group costs no writes beyond the probe's own
// report.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "core/peer_plan.h"

namespace ncclguard::core {

// The two tiers and two passes, as the block names them.
inline constexpr std::string_view kPeerTierTcp = "tcp";
inline constexpr std::string_view kPeerTierFabric = "fabric";
inline constexpr std::string_view kPeerPassRing = "ring";
inline constexpr std::string_view kPeerPassCulprit = "culprit";
// The paths a TCP test takes: from pod to pod (the nodes' FORWARD rules, NetworkPolicy), and
// from host to host (their INPUT rules), as pod-network and host-network training pods do.
inline constexpr std::string_view kPeerPathPod = "pod-network";
inline constexpr std::string_view kPeerPathHost = "host-network";

// The node's verdict (status.peer.standing).
inline constexpr std::string_view kPeerReachable = "Reachable";
inline constexpr std::string_view kPeerUnreachable = "Unreachable";  // fails with good nodes
inline constexpr std::string_view kPeerPairFault = "PairFault";      // fails with one peer only
inline constexpr std::string_view kPeerUndecided = "Undecided";  // a failure, no good node to tell
inline constexpr std::string_view kPeerUntested = "Untested";    // no round has tested it yet
// The only node of its type: nothing to test.
inline constexpr std::string_view kPeerAlone = "Alone";

// Whether the gate counts a node of this standing ("" : no peer checks, as before them).
bool PeerStandingCounts(std::string_view standing);

// One test this node ran as the client.
struct PeerTestResult {
  std::string peer;
  std::string pass;  // kPeerPassRing or kPeerPassCulprit
  std::string tier;  // kPeerTierTcp or kPeerTierFabric
  std::string path;  // tcp: kPeerPathPod, or kPeerPathHost from the hosts' own namespaces
  bool passed = false;
  std::string result;    // "passed", "timed-out", "refused", ... (probes/peer_tcp.h, peer_fabric.h)
  std::string ports;     // tcp: the ports tested, "29500,33012"
  int failed_port = 0;   // tcp: the first port that failed
  std::string provider;  // fabric: the provider that answered
  double milliseconds = 0;
  std::string detail;
};

struct PeerBlock {
  // The paths its TCP tier serves: "pod-network", or "pod-network,host-network".
  std::string path;
  std::string address;           // where peers reach this node's probe (the pod's address)
  std::uint16_t port_first = 0;  // its ip_local_port_range, where NCCL's sockets listen
  std::uint16_t port_last = 0;
  // The host path: the node's address and the host's ip_local_port_range; empty when the probe
  // cannot enter the host's network namespace.
  std::string host_address;
  std::uint16_t host_port_first = 0;
  std::uint16_t host_port_last = 0;
  std::string fabric_provider;  // "" when it serves no fabric tier
  std::string fabric_address;   // hex, probes::FabricEndpoint::Address
  std::uint64_t period_seconds = 0;
  std::uint64_t round = 0;  // the round `tests` belong to
  std::vector<PeerTestResult> tests;
  // The verdict, as of `judged_round`: what the round's tests by and of this node said.
  std::string standing;
  std::uint64_t judged_round = 0;
  std::vector<std::string> failed_with;  // the peers named, sorted
  std::string failed_tier;    // kPeerTierTcp when TCP failed, kPeerTierFabric when only it did
  std::string failed_detail;  // one failed test in words, its port and tier named
  std::string message;        // the verdict in words
};

Json PeerBlockJson(const PeerBlock& block);
// The block of a NodeValidation (status.peer); nullopt when it has none or it is not an object.
// Lenient: fields of the wrong type read as absent (the CRD's schema has checked them).
std::optional<PeerBlock> PeerBlockOf(const Json& validation);

// One member of a group as a round reads it.
struct PeerMember {
  std::string node;
  PeerBlock block;
};

// The outcomes of `round`'s two passes over `nodes` (sorted), read from the members' blocks:
// a planned test its client published for that round counts as published, one it did not
// publish passed. `second` is empty when the round's first pass had no failure.
struct RoundOutcomes {
  std::vector<PeerOutcome> first;
  std::vector<PeerOutcome> second;
};
RoundOutcomes OutcomesOf(std::span<const std::string> nodes, std::span<const PeerMember> members,
                         std::uint64_t round);

// The first pass's outcomes only (what the second pass is planned from, mid-round).
std::vector<PeerOutcome> FirstPassOf(std::span<const std::string> nodes,
                                     std::span<const PeerMember> members, std::uint64_t round);

// This node's verdict from a judged round: the standing JudgePeers gives it, the peers it failed
// with, and the tier and words of the first failed test it took part in (from either side).
// `tested` says whether anyone's test reached it as the server or it ran one as the client
// (a node nobody tested stays Untested); a group of one is Alone.
struct PeerJudgement {
  std::string standing;
  std::vector<std::string> failed_with;
  std::string failed_tier;
  std::string failed_detail;
  std::string message;
};
PeerJudgement JudgeSelf(std::string_view self, std::span<const std::string> nodes,
                        std::span<const PeerMember> members, std::uint64_t round, bool tested);

// The group a node's probe runs the checks between nodes with: its instance type, and its network
// block where it has one (nodes of one block test each other: a round's cost stays with the block's
// size), as a label value (at most 63 characters of [A-Za-z0-9._-], a hash of the whole when
// longer).
std::string PeerGroupOf(std::string_view instance_type, std::string_view block);

// The guide section of a peer failure of `tier`: "host-firewall" for TCP (section 16),
// "security-group" for the fabric alone (section 2).
std::string_view PeerFailureSlug(std::string_view tier);

}  // namespace ncclguard::core
