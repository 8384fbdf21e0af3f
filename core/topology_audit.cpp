#include "core/topology_audit.h"

#include <iterator>
#include <utility>

#include "core/json_access.h"
#include "core/pod_spec.h"
#include "core/topology.h"

namespace ncclguard::core {
namespace {

// The member, or a null that chains (Field(Field(node, "metadata"), "labels")).
const Json& Field(const Json& object, std::string_view key) {
  static const Json kNone;
  const Json* value = Member(object, key);
  return value == nullptr ? kNone : *value;
}

std::string StringField(const Json& object, std::string_view key) {
  const Json& value = Field(object, key);
  return value.is_string() ? value.get<std::string>() : "";
}

std::string NameOf(const Json& object) { return StringField(Field(object, "metadata"), "name"); }

std::string Nodes(std::size_t count) {
  return std::to_string(count) + (count == 1 ? " node" : " nodes");
}

std::string JoinLabels(const std::vector<std::string>& labels) {
  std::string out;
  for (const std::string& label : labels) out += (out.empty() ? "" : ", ") + label;
  return out;
}

}  // namespace

void NameSample::Add(std::string_view name) {
  ++count_;
  names_.emplace(name);
  if (names_.size() > limit_) names_.erase(std::prev(names_.end()));
}

void NameSample::Merge(const NameSample& other) {
  count_ += other.count_;
  names_.insert(other.names_.begin(), other.names_.end());
  while (names_.size() > limit_) names_.erase(std::prev(names_.end()));
}

std::string NameSample::Describe() const {
  std::string out;
  for (const std::string& name : names_) out += (out.empty() ? "" : ", ") + name;
  if (count_ > names_.size()) out += " and " + std::to_string(count_ - names_.size()) + " more";
  return out;
}

void TopologyLevelCensus::Add(std::string_view node_name, std::set<int> layers) {
  by_layers_[std::move(layers)].Add(node_name);
}

std::set<int> TopologyLevelCensus::Layers() const {
  std::set<int> all;
  for (const auto& [layers, nodes] : by_layers_) all.insert(layers.begin(), layers.end());
  return all;
}

NameSample TopologyLevelCensus::NodesMissingLevel() const {
  const std::set<int> all = Layers();
  NameSample missing;
  for (const auto& [layers, nodes] : by_layers_) {
    if (layers != all) missing.Merge(nodes);
  }
  return missing;
}

std::set<int> TopologyLevelCensus::LayersMissing() const {
  const std::set<int> all = Layers();
  std::set<int> lacked;
  for (const auto& [layers, nodes] : by_layers_) {
    for (const int layer : all) {
      if (!layers.contains(layer)) lacked.insert(layer);
    }
  }
  return lacked;
}

void TopologyAudit::AddResourceFlavor(const Json& flavor) {
  const Json& spec = Field(flavor, "spec");
  const std::string topology = StringField(spec, "topologyName");
  const std::string name = NameOf(flavor);
  if (topology.empty() || name.empty()) return;
  Flavor& kept = flavors_[name];
  kept = Flavor{};
  kept.topology = topology;
  const Json& labels = Field(spec, "nodeLabels");
  if (!labels.is_object()) return;
  for (const auto& [key, value] : labels.items()) {
    if (value.is_string()) kept.node_labels[key] = value.get<std::string>();
  }
}

void TopologyAudit::AddTopology(const Json& topology) {
  const std::string name = NameOf(topology);
  if (name.empty()) return;
  std::vector<std::string>& levels = topologies_[name];
  levels.clear();
  const Json& listed = Field(Field(topology, "spec"), "levels");
  if (!listed.is_array()) return;
  for (const Json& level : listed) {
    const std::string label = StringField(level, "nodeLabel");
    if (!label.empty()) levels.push_back(label);
  }
}

void TopologyAudit::AddNode(const Json& node) {
  const std::string name = NameOf(node);
  const Json& labels = Field(Field(node, "metadata"), "labels");
  const auto carries = [&labels](const std::string& key) {
    const Json& value = Field(labels, key);
    return value.is_string() && !value.get_ref<const std::string&>().empty();
  };
  const NodeTopology topology = ReadNodeTopology(labels);
  std::set<int> layers;
  for (const TopologyLevel& level : topology.levels) layers.insert(level.layer);
  const std::string type = StringField(labels, kInstanceTypeLabel);
  if (!type.empty()) types_[type].Add(name, layers);

  for (const auto& [topology_name, levels] : topologies_) {
    for (const std::string& label : levels) {
      if (carries(label)) carried_.insert(label);
    }
  }
  for (auto& [flavor_name, flavor] : flavors_) {
    bool matches = true;
    for (const auto& [key, value] : flavor.node_labels) {
      const Json& carried = Field(labels, key);
      matches = matches && carried.is_string() && carried.get_ref<const std::string&>() == value;
    }
    if (!matches) continue;
    ++flavor.nodes;
    if (!type.empty()) {
      flavor.by_type[type].Add(name);
    } else if (const TopologyLevel* deepest = topology.Deepest()) {
      flavor.untyped_by_depth[deepest->layer].Add(name);
    }
    if (const auto levels = topologies_.find(flavor.topology); levels != topologies_.end()) {
      for (const std::string& label : levels->second) {
        if (carries(label)) flavor.carried.insert(label);
      }
    }
  }
}

std::vector<TopologyWarning> TopologyAudit::Warnings() const {
  std::vector<TopologyWarning> out;
  NodeMissingLevelWarnings(out);
  MixedDepthWarnings(out);
  UnlabelledLevelWarnings(out);
  NotFoundWarnings(out);
  return out;
}

void TopologyAudit::NodeMissingLevelWarnings(std::vector<TopologyWarning>& out) const {
  for (const auto& [type, census] : types_) {
    const NameSample missing = census.NodesMissingLevel();
    if (missing.count() == 0) continue;
    std::vector<std::string> labels;
    for (const int layer : census.LayersMissing()) labels.push_back(NetworkLayerLabel(layer));
    const bool one = missing.count() == 1;
    out.push_back(
        {"NodeMissingTopologyLevel",
         std::to_string(missing.count()) + " " + type + (one ? " node lacks " : " nodes lack ") +
             (labels.size() == 1 ? labels.front() : "one or more of " + JoinLabels(labels)) +
             ", which other " + type + " nodes carry (" + missing.Describe() +
             "): Kueue's topology-aware scheduling leaves " + (one ? "it" : "them") +
             " out of a Topology's capacity"});
  }
}

void TopologyAudit::MixedDepthWarnings(std::vector<TopologyWarning>& out) const {
  struct DepthGroup {
    NameSample nodes;
    std::vector<std::string> types;
  };
  for (const auto& [name, flavor] : flavors_) {
    // Without its Topology, TopologyNotFound says what matters.
    if (!topologies_.contains(flavor.topology)) continue;
    std::map<int, DepthGroup> depths;
    for (const auto& [type, nodes] : flavor.by_type) {
      const std::set<int> layers = types_.at(type).Layers();
      if (layers.empty()) continue;  // a type without layer labels has no depth
      DepthGroup& group = depths[*layers.rbegin()];
      group.nodes.Merge(nodes);
      group.types.push_back(type);
    }
    for (const auto& [layer, nodes] : flavor.untyped_by_depth) depths[layer].nodes.Merge(nodes);
    if (depths.size() < 2) continue;
    std::string groups;
    for (const auto& [layer, group] : depths) {
      NameSample types;
      for (const std::string& type : group.types) types.Add(type);
      groups += (groups.empty() ? "" : "; ") + NetworkLayerName(layer) + " on " +
                Nodes(group.nodes.count()) + " (" +
                (group.types.empty() ? "" : types.Describe() + ": ") + group.nodes.Describe() + ")";
    }
    out.push_back({"MixedTopologyDepths",
                   "ResourceFlavor " + name +
                       "'s nodes end at different network-node-layer depths: " + groups +
                       ": its Topology " + flavor.topology +
                       " cannot fit every depth (naming a deeper level leaves the shallower nodes "
                       "out of Kueue's topology-aware scheduling, not naming it leaves the deeper "
                       "nodes' closest blocks unused); give each depth its own ResourceFlavor "
                       "and Topology"});
  }
}

void TopologyAudit::UnlabelledLevelWarnings(std::vector<TopologyWarning>& out) const {
  for (const auto& [name, flavor] : flavors_) {
    const auto levels = topologies_.find(flavor.topology);
    if (levels == topologies_.end()) continue;
    // A flavor that selects no node: the levels no node at all carries.
    const std::set<std::string>& carried = flavor.nodes > 0 ? flavor.carried : carried_;
    std::vector<std::string> unlabelled;
    for (const std::string& label : levels->second) {
      if (label != kHostnameLabel && !carried.contains(label)) unlabelled.push_back(label);
    }
    if (unlabelled.empty()) continue;
    const bool one = unlabelled.size() == 1;
    const std::string which = flavor.nodes == 0 ? "which no node carries"
                              : flavor.nodes == 1
                                  ? "which its one node does not carry"
                                  : "which none of its " + Nodes(flavor.nodes) + " carries";
    out.push_back({"TopologyLevelUnlabelled",
                   "ResourceFlavor " + name + "'s Topology " + flavor.topology + " names " +
                       (one ? "level " : "levels ") + JoinLabels(unlabelled) + ", " + which +
                       ": Kueue's topology-aware scheduling leaves out every node lacking a "
                       "level, so the flavor has no topology capacity"});
  }
}

void TopologyAudit::NotFoundWarnings(std::vector<TopologyWarning>& out) const {
  for (const auto& [name, flavor] : flavors_) {
    if (topologies_.contains(flavor.topology)) continue;
    out.push_back({"TopologyNotFound",
                   "ResourceFlavor " + name + " names Topology " + flavor.topology +
                       ", which does not exist: Kueue admits no workload to the flavor by "
                       "topology until it does"});
  }
}

}  // namespace ncclguard::core
