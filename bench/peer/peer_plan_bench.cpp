// The peer checks' plan (core/peer_plan.h) over a simulated group: random faults (dead nodes,
// nodes whose firewall drops new inbound connections), the same code the probes would run, one
// round at a time. Prints one line per (nodes, fault rate, seed) and the medians per (nodes,
// fault rate): tests a round, the same per node, status writes a round as the probe makes them
// (probes/peer_round.h: a live node writes its tests after a pass in which one of its tests
// failed, and its verdict when it changed; a healthy node writes nothing) in the round the
// faults appear and in the third round, rounds until every bad node is named, healthy nodes
// named wrongly, and the CPU time of planning and judging a round.
// Usage: ncclguard_peer_plan_bench [SEEDS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/peer_plan.h"

namespace {

using ncclguard::core::PeerOutcome;
using ncclguard::core::PeerPair;
using ncclguard::core::PeerStanding;

struct Faults {
  std::set<std::string> dead;
  std::set<std::string> inbound_dropped;
  std::vector<PeerOutcome> Run(const std::vector<PeerPair>& plan) const {
    std::vector<PeerOutcome> out;
    out.reserve(plan.size());
    for (const PeerPair& p : plan) {
      const bool passed = !dead.contains(p.client) && !dead.contains(p.server) &&
                          !inbound_dropped.contains(p.server);
      out.push_back({p.client, p.server, passed});
    }
    return out;
  }
};

struct Figures {
  double tests = 0, writes = 0, steady_writes = 0, rounds = 0, named_after = 0, wrong = 0,
         plan_us = 0;
};

// Live clients with a failed test among `outcomes`: each writes its tests once after the pass.
std::set<std::string> FailedClients(const std::vector<PeerOutcome>& outcomes,
                                    const std::set<std::string>& dead) {
  std::set<std::string> writers;
  for (const PeerOutcome& o : outcomes) {
    if (!o.passed && !dead.contains(o.client)) writers.insert(o.client);
  }
  return writers;
}

// A round's status writes: the first pass's failed clients, after the second pass (when it ran)
// every live client with a failed test of either pass, and each live node whose verdict changed.
std::size_t Writes(const std::vector<PeerOutcome>& first, const std::vector<PeerOutcome>& second,
                   const std::vector<ncclguard::core::PeerVerdict>& verdicts,
                   std::map<std::string, PeerStanding>& previous,
                   const std::set<std::string>& dead) {
  std::size_t writes = FailedClients(first, dead).size();
  if (!second.empty()) {
    std::set<std::string> writers = FailedClients(first, dead);
    for (const std::string& client : FailedClients(second, dead)) writers.insert(client);
    writes += writers.size();
  }
  for (const auto& v : verdicts) {
    if (dead.contains(v.node)) continue;
    const auto before = previous.find(v.node);
    const PeerStanding was = before == previous.end() ? PeerStanding::kReachable : before->second;
    if (was != v.standing) ++writes;
    previous[v.node] = v.standing;
  }
  return writes;
}

Figures Simulate(std::size_t n, unsigned per_mille, std::uint64_t seed) {
  std::vector<std::string> nodes;
  for (std::size_t i = 0; i < n; ++i) nodes.push_back("ip-10-0-" + std::to_string(100000 + i));
  std::mt19937_64 random(seed);
  Faults faults;
  std::set<std::string> bad;
  for (const std::string& node : nodes) {
    const auto draw = random() % 1000;
    if (draw < per_mille / 2) {
      faults.dead.insert(node);
      bad.insert(node);
    } else if (draw < per_mille) {
      faults.inbound_dropped.insert(node);
      bad.insert(node);
    }
  }
  Figures f;
  std::set<std::string> named;
  std::map<std::string, PeerStanding> previous;
  // Every round until each bad node is named (at most 20); at least three.
  for (std::uint64_t round = seed; f.rounds < 3 || (named != bad && f.rounds < 20); ++round) {
    const auto start = std::chrono::steady_clock::now();
    const auto first = faults.Run(ncclguard::core::RingPass(nodes, round));
    const auto second = faults.Run(ncclguard::core::CulpritPass(nodes, first, round));
    const auto verdicts = ncclguard::core::JudgePeers(nodes, first, second);
    const auto took = std::chrono::steady_clock::now() - start;
    const auto writes = static_cast<double>(Writes(first, second, verdicts, previous, faults.dead));
    if (f.rounds == 2) f.steady_writes = writes;
    if (f.rounds == 0) {
      f.tests = static_cast<double>(first.size() + second.size());
      f.writes = writes;
      f.plan_us =
          static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(took).count());
    }
    ++f.rounds;
    for (const auto& v : verdicts) {
      if (v.standing != PeerStanding::kUnreachable) continue;
      if (named.insert(v.node).second && !bad.contains(v.node)) ++f.wrong;
    }
    if (named == bad && f.named_after == 0) f.named_after = f.rounds;
  }
  return f;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int seeds = argc > 1 ? std::atoi(argv[1]) : 5;
  std::printf("%-6s %-6s %-5s %8s %10s %8s %8s %7s %6s %9s\n", "nodes", "faults", "seed", "tests",
              "tests/node", "writes", "steady", "rounds", "wrong", "plan_us");
  std::vector<std::string> medians;
  for (const std::size_t n : {16u, 64u, 1000u, 5000u}) {
    for (const unsigned per_mille : {2u, 10u, 50u}) {
      std::vector<double> tests, writes, steady, rounds, wrong, plan_us;
      for (int seed = 1; seed <= seeds; ++seed) {
        const Figures f = Simulate(n, per_mille, static_cast<std::uint64_t>(seed));
        std::printf("%-6zu %5.1f%% %-5d %8.0f %10.2f %8.0f %8.0f %7.0f %6.0f %9.0f\n", n,
                    per_mille / 10.0, seed, f.tests, f.tests / static_cast<double>(n), f.writes,
                    f.steady_writes, f.named_after, f.wrong, f.plan_us);
        tests.push_back(f.tests);
        writes.push_back(f.writes);
        steady.push_back(f.steady_writes);
        rounds.push_back(f.named_after);
        wrong.push_back(f.wrong);
        plan_us.push_back(f.plan_us);
      }
      char line[200];
      std::snprintf(line, sizeof line,
                    "%-6zu %5.1f%% %-5s %8.0f %10.2f %8.0f %8.0f %7.0f %6.0f %9.0f", n,
                    per_mille / 10.0, "med", Median(tests), Median(tests) / static_cast<double>(n),
                    Median(writes), Median(steady), Median(rounds), Median(wrong), Median(plan_us));
      medians.emplace_back(line);
    }
  }
  std::printf("\nmedians of %d seeds\n", seeds);
  for (const std::string& m : medians) std::printf("%s\n", m.c_str());
  return 0;
}
