#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "controllers/cluster_view.h"
#include "controllers/node_supply.h"
#include "core/json.h"
#include "core/policy.h"
#include "core/workload.h"

namespace ncclguard::controllers {

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

// The view's index when it keeps one (ClusterView::IndexedSupply), else every node of the type
// read from the view.
NodeSupply CountNodes(const NodeDemand& demand, const ClusterView& view,
                      const core::Policy& policy);

// `validation`: the node's NodeValidation (null when none). With `count_unvalidated` (the
// policy's gate.countUnvalidatedNodes) a node without a verdict is judged as a validated one;
// `unhealthy_why` receives HyperPod's word for a kUnhealthy node.
NodeStanding StandingOf(const Json& node, const Json* validation, const core::Policy& policy,
                        bool count_unvalidated, std::string* unhealthy_why = nullptr);

// The guide section of a hold with no other cause than too few validated nodes (the gate is
// explained in the EFA section), and the one the diagnosis insufficient-validated-nodes registers.
// A node that failed a check links that check's section, a node HyperPod marks unhealthy
// #sagemaker-hyperpod (EvaluateGate).
inline constexpr std::string_view kTooFewNodesSlug = "efa-config";

struct GateVerdict {
  bool release = false;
  std::string reason;   // NcclPreflight reason
  std::string message;  // NcclPreflight message; when held, each cause with its guide link
  // When held, the one source of the hold's guide section for everything that reports it (the
  // condition, the diagnosis and its Event, the Kueue AdmissionCheck, audit's WouldHold): the
  // section of the first cause. `held_for` is the message without the trailing link: the whole
  // message when its causes have sections of their own, each linked where it is named.
  std::string_view slug = {};
  std::string held_for = {};
};

// Whether the held job may start now. `demands` come from NodeDemands.
GateVerdict EvaluateGate(const std::vector<NodeDemand>& demands, const ClusterView& view,
                         const core::Policy& policy);

// The mode in force in `namespace_` (core::ModeIn): its ncclguard.io/mode label, else the
// policy's. In audit mode the gate and the AdmissionCheck hold nothing; they say what they would
// have held (reason kWouldHold).
core::Mode NamespaceMode(const ClusterView& view, std::string_view namespace_);
// The placement in force there (core::PlacementModeIn): its ncclguard.io/placement label, else the
// policy's. Required: the gate counts a job's validated nodes per closest network block.
core::PlacementMode NamespacePlacement(const ClusterView& view, std::string_view namespace_);

// The NcclPreflight reason and Event reason of a job audit mode would have held, and of a job
// held before its namespace turned to audit and released for it.
inline constexpr std::string_view kWouldHold = "WouldHold";
inline constexpr std::string_view kReleasedForAudit = "AuditMode";
// The NcclPreflight reason of a job admitted at creation (the gate's fast path) whose nodes no
// longer suffice when the controller first sees it (else the reason is the gate's own).
inline constexpr std::string_view kAdmittedAtCreation = "AdmittedAtCreation";

}  // namespace ncclguard::controllers
