// Who tests whom between nodes (docs/guide.md sections 2 and 16: a security group without its
// self-referencing rule, a host firewall): the plan every probe of a group computes alike from
// the same inputs, so no coordinator decides it, and the verdict read from the results. Pure:
// the probe runs the tests and publishes what it saw; the round number comes from its clock.
//
// A round has two passes. The first is a ring: n tests for n nodes, each node a client once and
// a server once, with a stride that changes every round so that every pair is tested within n-1
// rounds. A failed test says only that one of its two nodes is at fault; the second pass tests
// each node of a failed test again against a node known good (every first-pass test of its own
// passed), so the culprit is named, not just the pair.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ncclguard::core {

// One directed test: `client` connects to `server`, which listens while the round lasts.
struct PeerPair {
  std::string client;
  std::string server;
  bool operator==(const PeerPair&) const = default;
};

struct PeerOutcome {
  std::string client;
  std::string server;
  bool passed = false;
};

// The first pass of `round` over a group's nodes (sorted and unique; PeerGroupOf sorts): node i
// tests node (i + stride) mod n with stride 1 + round mod (n - 1). Empty for fewer than 2 nodes;
// for 2, the two directions.
std::vector<PeerPair> RingPass(std::span<const std::string> nodes, std::uint64_t round);

// The second pass: each node of a failed first-pass test, tested again (as the client) against a
// node known good, the good nodes taken in turn from a place that depends on the round so that
// none serves many more than the others. A node of a failed test is tested once, however many
// of its tests failed. Empty when every test passed or no node is known good.
std::vector<PeerPair> CulpritPass(std::span<const std::string> nodes,
                                  std::span<const PeerOutcome> first, std::uint64_t round);

enum class PeerStanding {
  kReachable,    // its tests passed, or it passed with a good node after a failed test
  kUnreachable,  // it failed with a node known good: the culprit
  kPairFault,    // it fails with one peer only (both passed with good nodes): names that peer
  kUndecided,    // a failed test and no good node to tell which side is at fault
};

struct PeerVerdict {
  std::string node;
  PeerStanding standing = PeerStanding::kReachable;
  std::vector<std::string> failed_with;  // the peers of its failed tests, sorted
};

// Every node's standing after both passes, in the order of `nodes`. A test that never ran (a
// node gone mid-round) is absent from the outcomes and counts neither way.
std::vector<PeerVerdict> JudgePeers(std::span<const std::string> nodes,
                                    std::span<const PeerOutcome> first,
                                    std::span<const PeerOutcome> second);

}  // namespace ncclguard::core
