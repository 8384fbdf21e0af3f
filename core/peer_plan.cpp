#include "core/peer_plan.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

namespace ncclguard::core {
namespace {

// Good nodes a suspect is tested against in the second pass: two where there are two, so that a
// fault between the suspect and one good node alone (a pair fault) is not taken for the suspect's.
constexpr std::size_t kWitnesses = 2;

struct FirstPassStanding {
  std::set<std::string_view> suspects;  // a failed test
  std::vector<std::string_view> good;   // every test passed, in the order of the nodes
};

FirstPassStanding Stand(std::span<const std::string> nodes, std::span<const PeerOutcome> first) {
  std::set<std::string_view> tested;
  FirstPassStanding standing;
  for (const PeerOutcome& o : first) {
    tested.insert(o.client);
    tested.insert(o.server);
    if (!o.passed) {
      standing.suspects.insert(o.client);
      standing.suspects.insert(o.server);
    }
  }
  for (const std::string& node : nodes) {
    if (tested.contains(node) && !standing.suspects.contains(node)) standing.good.push_back(node);
  }
  return standing;
}

}  // namespace

std::vector<PeerPair> RingPass(std::span<const std::string> nodes, std::uint64_t round) {
  const std::size_t n = nodes.size();
  if (n < 2) return {};
  const std::size_t stride = 1 + static_cast<std::size_t>(round % (n - 1));
  std::vector<PeerPair> pairs;
  pairs.reserve(n);
  for (std::size_t i = 0; i < n; ++i) pairs.push_back({nodes[i], nodes[(i + stride) % n]});
  return pairs;
}

std::vector<PeerPair> CulpritPass(std::span<const std::string> nodes,
                                  std::span<const PeerOutcome> first, std::uint64_t round) {
  const FirstPassStanding standing = Stand(nodes, first);
  const std::size_t good = standing.good.size();
  if (good == 0 || standing.suspects.empty()) return {};
  const std::size_t witnesses = std::min(kWitnesses, good);
  std::vector<PeerPair> pairs;
  std::size_t next = static_cast<std::size_t>(round % good);
  for (const std::string& node : nodes) {
    if (!standing.suspects.contains(node)) continue;
    // Both directions: a firewall that drops new inbound connections lets the node's own
    // outbound ones through.
    for (std::size_t w = 0; w < witnesses; ++w) {
      const std::string witness(standing.good[next++ % good]);
      pairs.push_back({node, witness});
      pairs.push_back({witness, node});
    }
  }
  return pairs;
}

std::vector<PeerVerdict> JudgePeers(std::span<const std::string> nodes,
                                    std::span<const PeerOutcome> first,
                                    std::span<const PeerOutcome> second) {
  const FirstPassStanding standing = Stand(nodes, first);
  const std::set<std::string_view> good(standing.good.begin(), standing.good.end());

  // Per suspect: the good nodes it was tested with, and those with which a test failed.
  std::map<std::string_view, std::set<std::string_view>> witnessed;
  std::map<std::string_view, std::set<std::string_view>> failed_witnesses;
  for (const PeerOutcome& o : second) {
    const bool client_suspect = standing.suspects.contains(o.client) && good.contains(o.server);
    const bool server_suspect = standing.suspects.contains(o.server) && good.contains(o.client);
    if (!client_suspect && !server_suspect) continue;  // not a test this round's plan makes
    const std::string_view suspect = client_suspect ? o.client : o.server;
    const std::string_view witness = client_suspect ? o.server : o.client;
    witnessed[suspect].insert(witness);
    if (!o.passed) failed_witnesses[suspect].insert(witness);
  }
  std::set<std::string_view> unreachable;
  for (const auto& [suspect, witnesses] : witnessed) {
    if (failed_witnesses[suspect] == witnesses) unreachable.insert(suspect);
  }

  // The first pass's failed peers of each node.
  std::map<std::string_view, std::set<std::string_view>> failed_peers;
  for (const PeerOutcome& o : first) {
    if (o.passed) continue;
    failed_peers[o.client].insert(o.server);
    failed_peers[o.server].insert(o.client);
  }

  std::vector<PeerVerdict> verdicts;
  verdicts.reserve(nodes.size());
  for (const std::string& node : nodes) {
    PeerVerdict verdict{node, PeerStanding::kReachable, {}};
    const auto failed = failed_peers.find(node);
    if (failed != failed_peers.end()) {
      if (unreachable.contains(node)) {
        verdict.standing = PeerStanding::kUnreachable;
        verdict.failed_with.assign(failed->second.begin(), failed->second.end());
      } else if (!witnessed.contains(node)) {
        verdict.standing = PeerStanding::kUndecided;
        verdict.failed_with.assign(failed->second.begin(), failed->second.end());
      } else {
        // Good nodes reach it: what failed is explained by an unreachable peer, or is a fault
        // of that one pair (a good node that failed it here too is named with the others).
        std::set<std::string_view> unexplained;
        for (const std::string_view peer : failed->second) {
          if (!unreachable.contains(peer)) unexplained.insert(peer);
        }
        const auto failed_witness = failed_witnesses.find(node);
        if (failed_witness != failed_witnesses.end()) {
          unexplained.insert(failed_witness->second.begin(), failed_witness->second.end());
        }
        if (!unexplained.empty()) {
          verdict.standing = PeerStanding::kPairFault;
          verdict.failed_with.assign(unexplained.begin(), unexplained.end());
        }
      }
    }
    verdicts.push_back(std::move(verdict));
  }
  return verdicts;
}

}  // namespace ncclguard::core
