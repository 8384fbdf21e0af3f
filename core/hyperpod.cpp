#include "core/hyperpod.h"

namespace ncclguard::core {
namespace {

std::optional<std::string> LabelOf(const Json& node, std::string_view key) {
  const auto metadata = node.find("metadata");
  if (metadata == node.end() || !metadata->is_object()) return std::nullopt;
  const auto labels = metadata->find("labels");
  if (labels == metadata->end() || !labels->is_object()) return std::nullopt;
  const auto value = labels->find(std::string(key));
  if (value == labels->end() || !value->is_string()) return std::nullopt;
  return value->get<std::string>();
}

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
    const auto health = LabelOf(node, kHyperPodHealthLabel);
    if (health && !health->empty() && *health != kHyperPodSchedulable) {
      return "HyperPod marks it " + *health;
    }
    if (const auto taint = TaintOf(node, kHyperPodHealthLabel)) {
      return "HyperPod taints it " + std::string(kHyperPodHealthLabel) +
             (taint->empty() ? "" : "=" + *taint);
    }
  }
  if (policy.deep_health_check) {
    const auto deep = LabelOf(node, kHyperPodDeepHealthLabel);
    if (deep && *deep == kHyperPodDeepHealthInProgress) {
      return "its HyperPod deep health check is InProgress";
    }
    if (deep && !deep->empty() && *deep != kHyperPodDeepHealthPassed) {
      return "its HyperPod deep health check " + *deep;
    }
    if (const auto taint = TaintOf(node, kHyperPodDeepHealthLabel)) {
      return "HyperPod taints it " + std::string(kHyperPodDeepHealthLabel) +
             (taint->empty() ? "" : "=" + *taint);
    }
  }
  return std::nullopt;
}

}  // namespace ncclguard::core
