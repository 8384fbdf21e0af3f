#include "core/hyperpod.h"

#include "core/json_access.h"

namespace ncclguard::core {
namespace {

// The value of a NoSchedule or NoExecute taint with `key`, if the node has one.
std::optional<std::string> TaintOf(const Json& node, std::string_view key) {
  const auto spec = node.find("spec");
  if (spec == node.end() || !spec->is_object()) return std::nullopt;
  const auto taints = spec->find("taints");
  if (taints == spec->end() || !taints->is_array()) return std::nullopt;
  for (const Json& taint : *taints) {
    if (!taint.is_object() || taint.value("key", "") != key) continue;
    const std::string effect = taint.value("effect", "");
    if (effect != "NoSchedule" && effect != "NoExecute") continue;
    return taint.value("value", "");
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> HyperPodUnhealthy(const Json& node, const HyperPodHealthPolicy& policy) {
  if (!node.is_object()) return std::nullopt;
  if (policy.node_health) {
    const std::string_view health = LabelValue(node, kHyperPodHealthLabel);
    if (!health.empty() && health != kHyperPodSchedulable) {
      return "HyperPod marks it " + std::string(health);
    }
    if (const auto taint = TaintOf(node, kHyperPodHealthLabel)) {
      return "HyperPod taints it " + std::string(kHyperPodHealthLabel) +
             (taint->empty() ? "" : "=" + *taint);
    }
  }
  if (policy.deep_health_check) {
    const std::string_view deep = LabelValue(node, kHyperPodDeepHealthLabel);
    if (deep == kHyperPodDeepHealthInProgress) {
      return "its HyperPod deep health check is InProgress";
    }
    if (!deep.empty() && deep != kHyperPodDeepHealthPassed) {
      return "its HyperPod deep health check " + std::string(deep);
    }
    if (const auto taint = TaintOf(node, kHyperPodDeepHealthLabel)) {
      return "HyperPod taints it " + std::string(kHyperPodDeepHealthLabel) +
             (taint->empty() ? "" : "=" + *taint);
    }
  }
  return std::nullopt;
}

}  // namespace ncclguard::core
