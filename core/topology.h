// A node's place in the network, as EKS (the AWS cloud controller manager) and SageMaker HyperPod
// label it from the EC2 instance topology: the network node at each layer
// (topology.k8s.aws/network-node-layer-N, layer 1 the farthest from the instance, the deepest layer
// present the closest block: 3 on p5, 4 on p6-b200) and, on UltraServers, the NVLink domain
// (topology.k8s.aws/ultraserver-id). The one reader of these labels (guide section 19).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"

namespace ncclguard::core {

inline constexpr std::string_view kNetworkNodeLayerPrefix = "topology.k8s.aws/network-node-layer-";
inline constexpr std::string_view kUltraServerLabel = "topology.k8s.aws/ultraserver-id";
// The level every node has (a Kueue Topology's lowest), which a network block never is.
inline constexpr std::string_view kHostnameLabel = "kubernetes.io/hostname";
// The deepest layer read: AWS labels up to 4 today; a key beyond this is not a layer.
inline constexpr int kMaxNetworkLayer = 16;

// One layer's label on a node: its number, the label's key and its value (the block's id).
struct TopologyLevel {
  int layer = 0;
  std::string label;
  std::string block;
};

struct NodeTopology {
  std::vector<TopologyLevel> levels;  // by layer, the farthest (layer 1) first
  std::string ultraserver;            // topology.k8s.aws/ultraserver-id, "" without

  // The deepest layer present (the closest block), nullptr without any.
  const TopologyLevel* Deepest() const { return levels.empty() ? nullptr : &levels.back(); }
  // The node's block at `layer`, nullptr when it has no label of that layer.
  const TopologyLevel* At(int layer) const;
  bool Labelled() const { return !levels.empty() || !ultraserver.empty(); }
};

// The layer number of a label key (3 of topology.k8s.aws/network-node-layer-3); nullopt for any
// other key, a layer that is not a whole number from 1 to kMaxNetworkLayer, or one written with
// leading zeros.
std::optional<int> NetworkLayerOf(std::string_view label_key);

// The label key of a layer (topology.k8s.aws/network-node-layer-<layer>).
std::string NetworkLayerLabel(int layer);

// The short name people use for a layer: "network-node-layer-3".
std::string NetworkLayerName(int layer);

// What a node's labels say of its place in the network. `labels`: the Node's metadata.labels
// (anything else reads as none); labels whose value is not a non-empty string are skipped.
NodeTopology ReadNodeTopology(const Json& labels);

// The node's closest network block: its block at the deepest layer present, "" without one.
std::string ClosestNetworkBlock(const Json& labels);

}  // namespace ncclguard::core
