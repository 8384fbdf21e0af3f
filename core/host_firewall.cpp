#include "core/host_firewall.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace ncclguard::core {
namespace {

constexpr int kTcp = 6;
constexpr int kMaxChainDepth = 16;
constexpr std::size_t kMaxPortIntervals = 256;

Tristate And(Tristate a, Tristate b) { return std::min(a, b); }

Tristate Not(Tristate a) {
  if (a == Tristate::kYes) return Tristate::kNo;
  if (a == Tristate::kNo) return Tristate::kYes;
  return a;
}

// Whether every port of [first, last] is in one of the ranges (kYes), none is (kNo), or some are.
Tristate PortsIn(const std::vector<PortRange>& ranges, PortRange interval) {
  std::uint32_t covered = 0;
  for (const PortRange& range : ranges) {
    const std::uint32_t from = std::max(range.first, interval.first);
    const std::uint32_t to = std::min(range.last, interval.last);
    if (from <= to) covered += to - from + 1;  // ranges overlapping each other are rare
  }
  const std::uint32_t size = std::uint32_t{interval.last} - interval.first + 1;
  if (covered == 0) return Tristate::kNo;
  return covered >= size ? Tristate::kYes : Tristate::kMaybe;
}

Tristate Matches(const FirewallRule& rule, PortRange interval) {
  Tristate result = rule.other;
  if (rule.protocol >= 0 && (rule.protocol == kTcp) == rule.protocol_negated) return Tristate::kNo;
  if (rule.ct_states != 0 && (rule.ct_states & kCtNew) == 0) return Tristate::kNo;
  for (const PortCondition& condition : rule.dports) {
    if (condition.unknown) {
      result = And(result, Tristate::kMaybe);
      continue;
    }
    const Tristate in = PortsIn(condition.ranges, interval);
    result = And(result, condition.negated ? Not(in) : in);
  }
  return result;
}

// What stopped a SYN in a chain: the rule (or policy) and where it is.
struct Hit {
  std::string chains;  // "INPUT" or "INPUT -> ufw-user-input"
  std::string rule;
  RuleVerdict verdict = RuleVerdict::kDrop;
  bool definite = true;
  std::string caveat;
  bool policy = false;
};

struct Walk {
  const FirewallTable& table;
  PortRange interval;
  std::vector<std::string> stack;           // the chains entered, base chain first
  std::optional<std::string> maybe_accept;  // the first rule that may have accepted the SYN
  std::optional<Hit> maybe_drop;            // the first rule that may have dropped it
  std::optional<Hit> drop;                  // the rule that did
  bool ended = false;                       // accepted, dropped, or an unknown verdict
};

std::string ChainPath(const std::vector<std::string>& stack) {
  std::string path;
  for (const std::string& chain : stack) path += (path.empty() ? "" : " -> ") + chain;
  return path;
}

std::string MaybeCaveat(const FirewallRule& rule, bool certain) {
  if (!rule.not_understood.empty()) return rule.not_understood;
  if (rule.verdict == RuleVerdict::kUnknown) return "its verdict is not understood";
  for (const PortCondition& condition : rule.dports)
    if (condition.unknown) return "its ports are in a set that was not read";
  if (!certain) return "an earlier rule or jump that is not understood may decide first";
  return "it matches some of the ports only for some peers";
}

const FirewallChain* FindChain(const FirewallTable& table, const std::string& name) {
  for (const FirewallChain& chain : table.chains)
    if (chain.name == name) return &chain;
  return nullptr;
}

void MaybeDropped(Walk& walk, const FirewallRule& rule, bool certain, std::string caveat = "") {
  if (walk.maybe_drop) return;
  walk.maybe_drop = Hit{ChainPath(walk.stack),
                        rule.text,
                        rule.verdict,
                        false,
                        caveat.empty() ? MaybeCaveat(rule, certain) : std::move(caveat),
                        false};
}

// Walks one chain for the SYN; true when it ended there (accepted or dropped, for certain or
// by a verdict not understood), false when it fell through or returned. `certain`: every
// condition on the way here held for certain.
bool WalkChain(Walk& walk, const FirewallChain& chain, bool certain) {
  walk.stack.push_back(chain.name);
  for (const FirewallRule& rule : chain.rules) {
    const Tristate match = Matches(rule, walk.interval);
    if (match == Tristate::kNo) continue;
    const bool sure = certain && match == Tristate::kYes;
    switch (rule.verdict) {
      case RuleVerdict::kContinue:
        break;
      case RuleVerdict::kAccept:
        if (sure) {
          walk.ended = true;
          return true;
        }
        if (!walk.maybe_accept) walk.maybe_accept = rule.text;
        break;
      case RuleVerdict::kDrop:
      case RuleVerdict::kReject:
        if (sure) {
          walk.drop =
              Hit{ChainPath(walk.stack), rule.text, rule.verdict, !walk.maybe_accept, "", false};
          if (walk.maybe_accept)
            walk.drop->caveat = "unless an earlier rule accepts it: " + *walk.maybe_accept;
          walk.ended = true;
          return true;
        }
        MaybeDropped(walk, rule, certain);
        break;
      case RuleVerdict::kUnknown:
        MaybeDropped(walk, rule, certain);
        if (!walk.maybe_accept) walk.maybe_accept = rule.text;
        if (sure) {
          walk.ended = true;
          return true;
        }
        break;
      case RuleVerdict::kJump:
      case RuleVerdict::kGoto: {
        const FirewallChain* target = FindChain(walk.table, rule.target);
        const bool loop =
            std::find(walk.stack.begin(), walk.stack.end(), rule.target) != walk.stack.end();
        if (!target || loop || walk.stack.size() >= kMaxChainDepth) {
          MaybeDropped(walk, rule, certain,
                       !target ? "chain " + rule.target + " was not read"
                               : "chain " + rule.target + " is entered too deep or in a loop");
          if (!walk.maybe_accept) walk.maybe_accept = rule.text;
          certain = false;
          break;
        }
        if (WalkChain(walk, *target, sure)) return true;
        if (rule.verdict == RuleVerdict::kGoto) {
          if (sure) {
            walk.stack.pop_back();
            return false;
          }
          certain = false;  // the rest of this chain may have been skipped
        }
        break;
      }
      case RuleVerdict::kReturn:
        if (sure) {
          walk.stack.pop_back();
          return false;
        }
        certain = false;
        break;
    }
  }
  walk.stack.pop_back();
  return false;
}

// The SYN's fate in one base chain, for ports in `interval`: the hit that drops it, if any.
std::optional<Hit> WalkBaseChain(const FirewallTable& table, const FirewallChain& chain,
                                 PortRange interval) {
  Walk walk{table, interval, {}, std::nullopt, std::nullopt, std::nullopt, false};
  if (!WalkChain(walk, chain, true) && chain.policy == RuleVerdict::kDrop) {
    Hit policy{chain.name, "policy drop", RuleVerdict::kDrop, !walk.maybe_accept, "", true};
    if (walk.maybe_accept)
      policy.caveat = "unless an earlier rule accepts it: " + *walk.maybe_accept;
    return policy;
  }
  if (walk.drop) return walk.drop;
  return walk.maybe_drop;
}

// The NCCL ports cut at every boundary of the rules' port conditions, so that each interval is
// wholly in or out of every condition; past kMaxPortIntervals, the ports as they are.
std::vector<PortRange> Intervals(const std::vector<FirewallTable>& tables, const NcclPorts& ports) {
  std::set<std::uint32_t> cuts;
  for (const FirewallTable& table : tables)
    for (const FirewallChain& chain : table.chains)
      for (const FirewallRule& rule : chain.rules)
        for (const PortCondition& condition : rule.dports)
          for (const PortRange& range : condition.ranges) {
            cuts.insert(range.first);
            cuts.insert(std::uint32_t{range.last} + 1);
          }
  std::vector<PortRange> intervals;
  for (const PortRange& range : ports.ranges) {
    std::uint32_t from = range.first;
    for (auto it = cuts.upper_bound(range.first); it != cuts.end() && *it <= range.last; ++it) {
      intervals.push_back({static_cast<std::uint16_t>(from), static_cast<std::uint16_t>(*it - 1)});
      from = *it;
    }
    intervals.push_back({static_cast<std::uint16_t>(from), range.last});
  }
  if (intervals.size() > kMaxPortIntervals) return ports.ranges;
  return intervals;
}

std::string TableWhere(const FirewallTable& table, const std::string& chains) {
  if (table.backend == FirewallBackend::kIptablesLegacy)
    return "iptables (legacy) " + table.name + " " + chains;
  return "nft table " + table.family + " " + table.name + " chain " + chains;
}

std::vector<PortRange> Merge(std::vector<PortRange> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](PortRange a, PortRange b) { return a.first < b.first; });
  std::vector<PortRange> merged;
  for (const PortRange& range : ranges) {
    if (!merged.empty() && std::uint32_t{merged.back().last} + 1 >= range.first)
      merged.back().last = std::max(merged.back().last, range.last);
    else
      merged.push_back(range);
  }
  return merged;
}

void FindInPath(const std::vector<FirewallTable>& tables, const NcclPorts& ports, FirewallPath path,
                std::vector<FirewallFinding>& findings) {
  const std::vector<PortRange> intervals = Intervals(tables, ports);
  for (const FirewallTable& table : tables) {
    if (table.family != "ip" && table.family != "inet") continue;
    for (const FirewallChain& chain : table.chains) {
      if (!(path == FirewallPath::kInput ? chain.hook_input : chain.hook_forward)) continue;
      // One finding per distinct hit in this chain, with the ports it stops.
      std::map<std::tuple<std::string, std::string, bool>, FirewallFinding> by_hit;
      std::vector<std::tuple<std::string, std::string, bool>> order;
      for (const PortRange& interval : intervals) {
        const auto hit = WalkBaseChain(table, chain, interval);
        if (!hit) continue;
        const auto key = std::make_tuple(hit->chains, hit->rule, hit->definite);
        auto [it, added] = by_hit.try_emplace(key);
        if (added) {
          order.push_back(key);
          FirewallFinding& finding = it->second;
          finding.path = path;
          finding.where = TableWhere(table, hit->chains);
          finding.rule = hit->rule;
          finding.policy = hit->policy;
          finding.verdict = hit->verdict;
          finding.definite = hit->definite;
          finding.caveat = hit->caveat;
        }
        it->second.ports.push_back(interval);
      }
      for (const auto& key : order) {
        FirewallFinding finding = std::move(by_hit[key]);
        finding.ports = Merge(std::move(finding.ports));
        findings.push_back(std::move(finding));
      }
    }
  }
}

}  // namespace

std::vector<FirewallFinding> FindNcclBlocks(const std::vector<FirewallTable>& tables,
                                            const NcclPorts& input_ports,
                                            const NcclPorts& forward_ports) {
  std::vector<FirewallFinding> findings;
  FindInPath(tables, input_ports, FirewallPath::kInput, findings);
  FindInPath(tables, forward_ports, FirewallPath::kForward, findings);
  std::stable_partition(findings.begin(), findings.end(),
                        [](const FirewallFinding& finding) { return finding.definite; });
  return findings;
}

std::string_view PathName(FirewallPath path) {
  return path == FirewallPath::kInput ? "INPUT (host-network pods)" : "FORWARD (pod-network pods)";
}

std::string DescribePorts(const std::vector<PortRange>& ports) {
  std::string text;
  for (const PortRange& range : ports) {
    if (!text.empty()) text += ", ";
    text += std::to_string(range.first);
    if (range.last != range.first) {
      text += '-';
      text += std::to_string(range.last);
    }
  }
  return text;
}

std::string DescribeFinding(const FirewallFinding& finding) {
  const bool reject = finding.verdict == RuleVerdict::kReject;
  const std::string_view action =
      finding.definite ? (reject ? "rejects" : "drops") : (reject ? "may reject" : "may drop");
  const std::string rule = !finding.policy    ? finding.rule
                           : finding.definite ? "policy drop, no rule accepting them first,"
                                              : "policy drop";
  std::string text = finding.where + ": " + rule + " ";
  text += action;
  text += " new TCP connections to port(s) " + DescribePorts(finding.ports) + " on ";
  text += PathName(finding.path);
  if (!finding.caveat.empty()) text += " (" + finding.caveat + ")";
  return text;
}

}  // namespace ncclguard::core
