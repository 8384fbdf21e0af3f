#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "core/contract.h"
#include "core/json.h"
#include "probes/report.h"

// The cluster side of a probe report (docs/contract.md, "NodeValidation"): the NodeValidation
// object, the node label and the node condition (names in core/contract.h). Pure: building the
// objects here, sending them lives with the kube client.
namespace ncclguard::probes {

inline constexpr std::string_view kNodeValidationKind = "NodeValidation";

// status of the NodeValidation: instanceType, summary, checks[], lastProbeTime, probeVersion.
core::Json NodeValidationStatus(const ProbeReport& report);

// The whole cluster-scoped object, named after the node (report.node_name must be set).
core::Json NodeValidationObject(const ProbeReport& report);

// "true" when the node counts as validated (summary Pass or Warn), "false" on a Fail.
std::string ValidatedLabelValue(const ProbeReport& report);

// JSON merge patch for the Node setting the validated label.
core::Json NodeLabelPatch(const ProbeReport& report);

// The NcclReady node condition. `previous` is the node's current NcclReady condition, or null:
// lastTransitionTime only moves when the status changes.
core::Json NcclReadyCondition(const ProbeReport& report, const core::Json& previous,
                              std::chrono::system_clock::time_point now);

// Strategic merge patch for nodes/<name>/status: conditions merge by type, so this replaces
// NcclReady and leaves the kubelet's conditions alone.
core::Json NodeConditionPatch(const core::Json& condition);

// The node's current condition of that type, or null (node: a Node object).
core::Json FindNodeCondition(const core::Json& node, std::string_view type);

}  // namespace ncclguard::probes
