// SageMaker HyperPod's own names that ncclguard reads: the health verdicts its agents put on
// nodes (labels and taints). Pure logic over a Node object.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/json.h"

namespace ncclguard::core {

// HyperPod's health-monitoring agent: Schedulable, or Unschedulable,
// UnschedulablePendingReplacement, UnschedulablePendingReboot (a taint of the same key goes with
// these).
inline constexpr std::string_view kHyperPodHealthLabel =
    "sagemaker.amazonaws.com/node-health-status";
inline constexpr std::string_view kHyperPodSchedulable = "Schedulable";
// HyperPod's deep health checks (stress and connectivity tests of a new or replaced node):
// InProgress, Passed or Failed.
inline constexpr std::string_view kHyperPodDeepHealthLabel =
    "sagemaker.amazonaws.com/deep-health-check-status";
inline constexpr std::string_view kHyperPodDeepHealthPassed = "Passed";
inline constexpr std::string_view kHyperPodDeepHealthInProgress = "InProgress";

// Which of HyperPod's verdicts the gate honours (NcclPolicy spec.gate.hyperPod).
struct HyperPodHealthPolicy {
  bool node_health = true;        // the health label or taint says unschedulable
  bool deep_health_check = true;  // the deep health check failed or is running
};

// Why HyperPod says the node must not run a job ("HyperPod marks it
// UnschedulablePendingReplacement", "its HyperPod deep health check Failed"), or nullopt when it
// says nothing against it. Nodes without HyperPod's labels are never unhealthy.
std::optional<std::string> HyperPodUnhealthy(const Json& node, const HyperPodHealthPolicy& policy);

}  // namespace ncclguard::core
