#include "controllers/observed_catalog.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "controllers/json_fields.h"
#include "core/errors.h"
#include "core/json_access.h"
#include "core/pod_spec.h"
#include "core/topology.h"

namespace ncclguard::controllers {
namespace {

// A capacity count of the node's, 0 when absent or not a whole count (the API server stores
// quantities, which a device plugin's count always is).
int Capacity(const core::Json& node, std::string_view resource) {
  const core::JsonPointer at("/status/capacity/" + core::EscapePointerToken(resource));
  if (!node.contains(at)) return 0;
  try {
    const std::int64_t count = core::ParseCount(node.at(at), at);
    return static_cast<int>(std::clamp<std::int64_t>(count, 0, 64));
  } catch (const core::InputError&) {
    return 0;
  }
}

std::string InstanceTypeOf(const core::Json& node) {
  return Label(node, core::kInstanceTypeLabel).value_or("");
}

bool SameCounts(const core::ObservedInstanceType& a, const core::ObservedInstanceType& b) {
  return a.name == b.name && a.gpus == b.gpus && a.efa_devices == b.efa_devices;
}

bool SameEntry(const core::ObservedInstanceType& a, const core::ObservedInstanceType& b) {
  return SameCounts(a, b) && a.nodes == b.nodes && a.node_names == b.node_names &&
         a.observed_time == b.observed_time && a.topology_levels == b.topology_levels &&
         a.nodes_missing_topology_level == b.nodes_missing_topology_level &&
         a.ultra_server == b.ultra_server && a.ultra_server_nodes == b.ultra_server_nodes;
}

std::vector<core::ObservedInstanceType>::const_iterator FindType(
    const std::vector<core::ObservedInstanceType>& catalog, const std::string& name) {
  return std::find_if(catalog.begin(), catalog.end(),
                      [&](const core::ObservedInstanceType& p) { return p.name == name; });
}

// The layers a node's labels carry, and its UltraServer id ("" without).
std::pair<std::set<int>, std::string> TopologyShape(const core::Json& node) {
  const auto metadata = node.find("metadata");
  const core::NodeTopology topology = core::ReadNodeTopology(
      metadata != node.end() && metadata->is_object() ? metadata->value("labels", core::Json())
                                                      : core::Json());
  std::set<int> layers;
  for (const core::TopologyLevel& level : topology.levels) layers.insert(level.layer);
  return {std::move(layers), topology.ultraserver};
}

}  // namespace

void InstanceTypeObserver::Add(const core::Json& node) {
  const std::string type = InstanceTypeOf(node);
  const int gpus = Capacity(node, core::kGpuResource);
  if (type.empty() || gpus == 0) return;
  core::ObservedInstanceType& seen = by_type_[type];
  seen.name = type;
  seen.gpus = std::max(seen.gpus, gpus);
  seen.efa_devices = std::max(seen.efa_devices, Capacity(node, core::kEfaResource));
  ++seen.nodes;
  std::string name = Meta(node, "name");
  auto [layers, ultra] = TopologyShape(node);
  if (!ultra.empty()) {
    seen.ultra_server = true;
    seen.ultra_server_nodes = std::max(seen.ultra_server_nodes, ++ultra_servers_[type][ultra]);
  }
  levels_[type].Add(name, std::move(layers));
  names_[type].push_back(std::move(name));
}

std::vector<core::ObservedInstanceType> InstanceTypeObserver::Result() && {
  std::vector<core::ObservedInstanceType> observed;
  observed.reserve(by_type_.size());
  for (auto& [type, seen] : by_type_) {
    std::vector<std::string>& list = names_[type];
    const auto keep = std::min(list.size(), core::kMaxObservedNodeNames);
    std::partial_sort(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(keep), list.end());
    list.resize(keep);
    seen.node_names = std::move(list);
    // Every layer any node of the type carries; a node that lacks one of them is counted.
    const core::TopologyLevelCensus& census = levels_[type];
    seen.nodes_missing_topology_level = static_cast<int>(census.NodesMissingLevel().count());
    for (const int layer : census.Layers()) {
      seen.topology_levels.push_back(core::NetworkLayerLabel(layer));
    }
    observed.push_back(std::move(seen));
  }
  return observed;
}

std::vector<core::ObservedInstanceType> ObserveInstanceTypes(const std::vector<core::Json>& nodes) {
  InstanceTypeObserver observer;
  for (const core::Json& node : nodes) observer.Add(node);
  return std::move(observer).Result();
}

std::optional<std::vector<core::ObservedInstanceType>> ObservedCatalogUpdate(
    std::vector<core::ObservedInstanceType> seen,
    const std::vector<core::ObservedInstanceType>& published, Timestamp now) {
  for (core::ObservedInstanceType& entry : seen) {
    const auto before = FindType(published, entry.name);
    const bool unchanged =
        before != published.end() && SameCounts(*before, entry) && !before->observed_time.empty();
    entry.observed_time = unchanged ? before->observed_time : FormatTime(now);
  }
  const bool same = seen.size() == published.size() &&
                    std::equal(seen.begin(), seen.end(), published.begin(), SameEntry);
  if (same) return std::nullopt;
  return seen;
}

std::vector<core::ObservedInstanceType> TopologyLevelChanges(
    const std::vector<core::ObservedInstanceType>& written,
    const std::vector<core::ObservedInstanceType>& published) {
  std::vector<core::ObservedInstanceType> changed;
  for (const core::ObservedInstanceType& entry : written) {
    if (entry.nodes_missing_topology_level == 0) continue;
    const auto before = FindType(published, entry.name);
    if (before == published.end() ||
        before->nodes_missing_topology_level != entry.nodes_missing_topology_level) {
      changed.push_back(entry);
    }
  }
  return changed;
}

bool ObservedFieldsDiffer(const core::Json& before, const core::Json& after) {
  return InstanceTypeOf(before) != InstanceTypeOf(after) ||
         Capacity(before, core::kGpuResource) != Capacity(after, core::kGpuResource) ||
         Capacity(before, core::kEfaResource) != Capacity(after, core::kEfaResource) ||
         TopologyShape(before) != TopologyShape(after);
}

}  // namespace ncclguard::controllers
