#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "controllers/cluster_view.h"
#include "core/json.h"
#include "core/policy.h"
#include "core/workload.h"

namespace ncclguard::controllers {

// Nodes of one instance type that a job's pods need.
struct NodeDemand {
  std::string instance_type;
  std::int64_t nodes = 0;
};

// The nodes the job's GPU pod templates need, per instance type (sorted by name). GPUs of all
// templates on one type are packed onto whole nodes (a lower bound, so the gate never waits for
// more nodes than the job can use); an instance type missing from the catalog counts one node per
// pod. Templates without GPUs or without a known instance type need no validated node.
// Throws core::InputError when the spec cannot be read.
std::vector<NodeDemand> NodeDemands(const Json& job, const core::Policy& policy,
                                    const core::RuntimeLookup& runtimes = {});
// The same over explicit pod templates of `object` (a Kueue Workload's pod sets).
std::vector<NodeDemand> NodeDemands(const Json& object,
                                    const std::vector<core::PodTemplate>& templates,
                                    const core::Policy& policy);

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
};

NodeSupply CountNodes(const NodeDemand& demand, const ClusterView& view,
                      const core::Policy& policy);

// Where one node stands for the gate.
enum class NodeStanding {
  kValidated,    // counts: its NodeValidation passed (Pass or Warn), schedulable, healthy
  kFailed,       // its NodeValidation's summary is Fail
  kUnvalidated,  // no NodeValidation verdict yet (or one this build does not know)
  kCordoned,     // validated but spec.unschedulable
  kUnhealthy,    // validated but SageMaker HyperPod marks it unhealthy (core/hyperpod.h)
};
// "validated", "failed", "unvalidated", "cordoned", "unhealthy".
std::string_view NodeStandingName(NodeStanding standing);

// `validation`: the node's NodeValidation (null when none). With `count_unvalidated` (the
// policy's gate.countUnvalidatedNodes) a node without a verdict is judged as a validated one;
// `unhealthy_why` receives HyperPod's word for a kUnhealthy node.
NodeStanding StandingOf(const Json& node, const Json* validation, const core::Policy& policy,
                        bool count_unvalidated, std::string* unhealthy_why = nullptr);

struct GateVerdict {
  bool release = false;
  std::string reason;   // NcclPreflight reason
  std::string message;  // NcclPreflight message, with the guide link when held
};

// Whether the held job may start now. `demands` come from NodeDemands.
GateVerdict EvaluateGate(const std::vector<NodeDemand>& demands, const ClusterView& view,
                         const core::Policy& policy);

// The mode in force in `namespace_` (core::ModeIn): its ncclguard.io/mode label, else the
// policy's. In audit mode the gate and the AdmissionCheck hold nothing; they say what they would
// have held (reason kWouldHold).
core::Mode NamespaceMode(const ClusterView& view, std::string_view namespace_);

// The NcclPreflight reason and Event reason of a job audit mode would have held, and of a job
// held before its namespace turned to audit and released for it.
inline constexpr std::string_view kWouldHold = "WouldHold";
inline constexpr std::string_view kReleasedForAudit = "AuditMode";

}  // namespace ncclguard::controllers
