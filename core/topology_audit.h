// What a cluster admin must know of the topology labels (core/topology.h) before Kueue's
// topology-aware scheduling (TAS) can use them (docs/operator.md, "Placement", "Admin
// warnings"): Kueue silently leaves out of a Topology's capacity a node that lacks one of its
// levels, and one Topology cannot describe nodes whose deepest levels differ. Pure: `ncclguard
// audit` lists the objects page by page and hands them over one at a time; only counts and a few
// names of each are kept.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"

namespace ncclguard::core {

// The nodes a warning names, at most this many, then "and N more".
inline constexpr std::size_t kMaxWarnedNodeNames = 3;

struct TopologyWarning {
  // UpperCamelCase: NodeMissingTopologyLevel, MixedTopologyDepths, TopologyLevelUnlabelled,
  // TopologyNotFound.
  std::string reason;
  std::string message;  // a sentence an admin reads; no guide link (the caller adds its own)
  bool operator==(const TopologyWarning&) const = default;
};

// How many names were seen, and the first `limit` of them by name.
class NameSample {
 public:
  explicit NameSample(std::size_t limit = kMaxWarnedNodeNames) : limit_(limit) {}
  void Add(std::string_view name);
  void Merge(const NameSample& other);
  std::size_t count() const { return count_; }
  const std::set<std::string>& names() const { return names_; }
  // "a, b, c and 9 more" (the names kept, then how many were not).
  std::string Describe() const;

 private:
  std::size_t limit_;
  std::size_t count_ = 0;
  std::set<std::string> names_;
};

// One instance type's nodes, by the set of network-node-layer numbers each carries: which layers
// the type's nodes carry, and which nodes lack one of them (the learned catalog's
// topologyLevels and nodesMissingTopologyLevel, and the audit's NodeMissingTopologyLevel).
class TopologyLevelCensus {
 public:
  void Add(std::string_view node_name, std::set<int> layers);
  // Every layer a node of the type carries, the farthest first.
  std::set<int> Layers() const;
  // The nodes that lack one of Layers(), and the layers they lack.
  NameSample NodesMissingLevel() const;
  std::set<int> LayersMissing() const;

 private:
  std::map<std::set<int>, NameSample> by_layers_;
};

class TopologyAudit {
 public:
  // Kueue's ResourceFlavors and Topologies first (a cluster has few), then the nodes: a node is
  // matched against the flavors and Topologies added before it. A ResourceFlavor without
  // spec.topologyName (not a TAS flavor) is ignored; so are fields of the wrong type.
  void AddResourceFlavor(const Json& flavor);
  void AddTopology(const Json& topology);
  void AddNode(const Json& node);

  // By reason (in the order above), then by instance type or flavor name.
  std::vector<TopologyWarning> Warnings() const;

 private:
  struct Flavor {
    std::map<std::string, std::string> node_labels;
    std::string topology;
    std::size_t nodes = 0;
    // Its nodes by instance type (a type's depth is the deepest layer any node of it carries: a
    // node short of it is NodeMissingTopologyLevel's), and those without a type by their own.
    std::map<std::string, NameSample> by_type;
    std::map<int, NameSample> untyped_by_depth;
    std::set<std::string> carried;  // the Topology's level labels its nodes carry
  };

  void NodeMissingLevelWarnings(std::vector<TopologyWarning>& out) const;
  void MixedDepthWarnings(std::vector<TopologyWarning>& out) const;
  void UnlabelledLevelWarnings(std::vector<TopologyWarning>& out) const;
  void NotFoundWarnings(std::vector<TopologyWarning>& out) const;

  std::map<std::string, TopologyLevelCensus> types_;            // by instance type
  std::map<std::string, Flavor> flavors_;                       // the TAS flavors, by name
  std::map<std::string, std::vector<std::string>> topologies_;  // level labels, by Topology
  std::set<std::string> carried_;  // the Topologies' level labels any node carries
};

}  // namespace ncclguard::core
