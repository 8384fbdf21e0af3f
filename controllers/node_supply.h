// What the gate counts: the nodes a job needs per instance type (NodeDemand), how the nodes of
// that type stand (NodeSupply), and the few facts of one node that decide its standing
// (NodeFacts), read once from its Node and NodeValidation so that an index can keep them
// (manager/node_supply_index.h) instead of reading every node again for every held job.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/json.h"
#include "core/policy.h"

namespace ncclguard::controllers {

using core::Json;

// Nodes of one instance type that a job's pods need.
struct NodeDemand {
  std::string instance_type;
  std::int64_t nodes = 0;
  // The job's pods must share one closest network block (NcclPolicy spec.placement required,
  // core/placement_request.h): the nodes are counted per block.
  bool one_block = false;
};

// How the validated nodes of one instance type stand against a demand.
struct NodeSupply {
  std::string instance_type;
  std::int64_t needed = 0;
  std::int64_t counted = 0;   // nodes that count for the gate
  std::int64_t cordoned = 0;  // otherwise counting nodes that are cordoned
  std::int64_t unprobed =
      0;  // nodes without a NodeValidation verdict (and the policy not counting them)
  std::int64_t failed = 0;  // NodeValidation summary Fail
  // Otherwise counting nodes that SageMaker HyperPod marks unhealthy (core/hyperpod.h); the
  // first by name and why.
  std::int64_t hyperpod_unhealthy = 0;
  std::string unhealthy_node;
  std::string unhealthy_why;
  // The first failed node (by name) and the check that failed it, for the message.
  std::string failed_node;
  std::string failed_check;  // a node check id, "" when none is named
  std::string failed_detail;
  // Otherwise counting nodes whose checks between nodes failed (core/peer_status.h), and those
  // no round has tested yet; the first failed by name: its peers, tier and the failed test.
  std::int64_t peer_failed = 0;
  std::int64_t peer_untested = 0;
  std::string peer_node;
  std::string peer_standing;
  std::vector<std::string> peer_with;
  std::string peer_tier;
  std::string peer_detail;
  // The counted nodes by their closest network block ("network-node-layer-3 nn-a";
  // core/topology.h), nodes without a layer label left out.
  std::map<std::string, std::int64_t> counted_by_block;

  // The block with the most counted nodes (the first by name among equals) and how many; {"", 0}
  // without any.
  std::pair<std::string, std::int64_t> LargestBlock() const;

  bool operator==(const NodeSupply&) const = default;
};

// Where one node stands for the gate.
enum class NodeStanding {
  kValidated,     // counts: its NodeValidation passed (Pass or Warn), schedulable, healthy
  kFailed,        // its NodeValidation's summary is Fail
  kUnvalidated,   // no NodeValidation verdict yet (or one this build does not know)
  kCordoned,      // validated but spec.unschedulable
  kUnhealthy,     // validated but SageMaker HyperPod marks it unhealthy (core/hyperpod.h)
  kPeerFailed,    // validated, but its checks between nodes failed: its peers cannot reach it
  kPeerUntested,  // validated, its probe runs peer checks, and no round has tested it yet
};
// "validated", "failed", "unvalidated", "cordoned", "unhealthy", "peer-failed", "peer-untested".
std::string_view NodeStandingName(NodeStanding standing);

// What decides one node's standing, whatever the policy: the NodeValidation's summary and first
// failing check, the Node's cordon and HyperPod's two verdicts (each read as if the policy
// honoured it alone).
struct NodeFacts {
  std::string summary;  // NodeValidation status.summary, "" without one
  std::string failed_check;
  std::string failed_detail;
  bool cordoned = false;
  std::optional<std::string> hyperpod_node_health;  // why HyperPod's health verdict says no
  std::optional<std::string> hyperpod_deep_health;  // why its deep health check says no
  // The NodeValidation's status.peer verdict ("" without peer checks: counted as before them).
  std::string peer_standing;
  std::vector<std::string> peer_with;
  std::string peer_tier;
  std::string peer_detail;
  // The node's closest network block: "network-node-layer-<N> <value>" at its deepest layer, ""
  // without a layer label.
  std::string block;

  bool operator==(const NodeFacts&) const = default;
};
// `node` and `validation` may be null (not known).
NodeFacts FactsOf(const Json* node, const Json* validation);

// `count_unvalidated` (the policy's gate.countUnvalidatedNodes): a node without a verdict is
// judged as a validated one. `unhealthy_why` receives HyperPod's word for a kUnhealthy node.
NodeStanding StandingOf(const NodeFacts& facts, const core::Policy& policy, bool count_unvalidated,
                        std::string* unhealthy_why = nullptr);

// Counts one node of the supply's type, named `name`. Nodes are added in name order: the first
// failed and the first unhealthy node are the ones the message names.
void Tally(NodeSupply& supply, std::string_view name, const NodeFacts& facts,
           const core::Policy& policy);

}  // namespace ncclguard::controllers
