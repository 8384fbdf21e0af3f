#include "core/placement_request.h"

#include <algorithm>

#include "core/json_access.h"
#include "core/topology.h"

namespace ncclguard::core {
namespace {

// A label key that says where a node sits in the network (core/topology.h).
bool TopologyLabel(std::string_view key) {
  return key == kUltraServerLabel || NetworkLayerOf(key).has_value();
}

bool NonEmpty(const Json* value) {
  return value != nullptr && !value->is_null() &&
         !((value->is_object() || value->is_array()) && value->empty());
}

// Whether a node selector term (matchExpressions) names a topology label.
bool TermNamesTopology(const Json& term) {
  const Json* expressions = Member(term, "matchExpressions");
  if (expressions == nullptr || !expressions->is_array()) return false;
  return std::any_of(expressions->begin(), expressions->end(), [](const Json& expression) {
    const Json* key = Member(expression, "key");
    return key != nullptr && key->is_string() && TopologyLabel(key->get_ref<const std::string&>());
  });
}

bool NodeAffinityNamesTopology(const Json* node_affinity) {
  if (node_affinity == nullptr || !node_affinity->is_object()) return false;
  if (const Json* required =
          Member(*node_affinity, "requiredDuringSchedulingIgnoredDuringExecution")) {
    const Json* terms = Member(*required, "nodeSelectorTerms");
    if (terms != nullptr && terms->is_array() &&
        std::any_of(terms->begin(), terms->end(), TermNamesTopology)) {
      return true;
    }
  }
  const Json* preferred = Member(*node_affinity, "preferredDuringSchedulingIgnoredDuringExecution");
  if (preferred == nullptr || !preferred->is_array()) return false;
  return std::any_of(preferred->begin(), preferred->end(), [](const Json& entry) {
    const Json* term = Member(entry, "preference");
    return term != nullptr && TermNamesTopology(*term);
  });
}

// The deepest layer of `labels` (node label keys), 0 without any.
int DeepestLayer(const std::vector<std::string>& labels) {
  int deepest = 0;
  for (const std::string& label : labels)
    deepest = std::max(deepest, NetworkLayerOf(label).value_or(0));
  return deepest;
}

bool FitsUltraServer(const InstanceType* type, std::int64_t job_pods) {
  return type != nullptr && type->ultra_server_nodes > 0 && job_pods > 0 &&
         job_pods <= type->ultra_server_nodes;
}

}  // namespace

bool HasKueueTopologyRequest(const Json* template_metadata) {
  if (template_metadata == nullptr || !template_metadata->is_object()) return false;
  const Json* annotations = Member(*template_metadata, "annotations");
  if (annotations == nullptr || !annotations->is_object()) return false;
  return std::any_of(kKueueTopologyAnnotations.begin(), kKueueTopologyAnnotations.end(),
                     [&](std::string_view key) { return Member(*annotations, key) != nullptr; });
}

bool HasOwnPlacement(const Json& pod_spec) {
  if (!pod_spec.is_object()) return false;
  if (NonEmpty(Member(pod_spec, "topologySpreadConstraints"))) return true;
  if (const Json* selector = Member(pod_spec, "nodeSelector");
      selector != nullptr && selector->is_object()) {
    for (const auto& [key, value] : selector->items()) {
      if (TopologyLabel(key)) return true;
    }
  }
  const Json* affinity = Member(pod_spec, "affinity");
  if (affinity == nullptr || !affinity->is_object()) return false;
  return NonEmpty(Member(*affinity, "podAffinity")) ||
         NonEmpty(Member(*affinity, "podAntiAffinity")) ||
         NodeAffinityNamesTopology(Member(*affinity, "nodeAffinity"));
}

std::optional<std::string> KueueTopologyLevel(const std::vector<std::string>& levels,
                                              const InstanceType* type, std::int64_t job_pods) {
  const bool lists_ultra =
      std::find(levels.begin(), levels.end(), kUltraServerLabel) != levels.end();
  if (lists_ultra && FitsUltraServer(type, job_pods)) return std::string(kUltraServerLabel);
  // The deepest network layer the Topology lists that the type's nodes carry.
  const std::string* deepest = nullptr;
  int deepest_layer = 0;
  for (const std::string& level : levels) {
    const std::optional<int> layer = NetworkLayerOf(level);
    if (!layer || *layer <= deepest_layer) continue;
    if (type != nullptr && !type->topology_levels.empty() &&
        std::find(type->topology_levels.begin(), type->topology_levels.end(), level) ==
            type->topology_levels.end()) {
      continue;
    }
    deepest = &level;
    deepest_layer = *layer;
  }
  if (deepest != nullptr) return *deepest;
  // A Topology of other labels (an admin's own blocks and racks): its deepest but the host.
  for (auto level = levels.rbegin(); level != levels.rend(); ++level) {
    if (*level != kHostnameLabel && !level->empty() && *level != kUltraServerLabel) return *level;
  }
  return std::nullopt;
}

std::optional<std::string> AffinityTopologyLevel(const Policy& policy, const InstanceType* type,
                                                 std::int64_t job_pods) {
  if (FitsUltraServer(type, job_pods)) return std::string(kUltraServerLabel);
  if (type != nullptr && !type->topology_levels.empty()) {
    const int layer = DeepestLayer(type->topology_levels);
    if (layer > 0) return NetworkLayerLabel(layer);
  }
  if (type != nullptr) return std::nullopt;  // a type known to carry no layer
  // No type known: the deepest layer, when every labelled type agrees on it.
  int agreed = 0;
  for (const InstanceType& known : policy.instance_types) {
    const int layer = DeepestLayer(known.topology_levels);
    if (layer == 0) continue;
    if (agreed != 0 && agreed != layer) return std::nullopt;
    agreed = layer;
  }
  if (agreed == 0) return std::nullopt;
  return NetworkLayerLabel(agreed);
}

Json JobAffinityTerm(std::string_view job_label, std::string_view job_name,
                     std::string_view level) {
  return Json{
      {"labelSelector", {{"matchLabels", {{std::string(job_label), std::string(job_name)}}}}},
      {"topologyKey", std::string(level)}};
}

}  // namespace ncclguard::core
