#include "core/topology.h"

#include <algorithm>
#include <charconv>

namespace ncclguard::core {
const TopologyLevel* NodeTopology::At(int layer) const {
  const auto it = std::find_if(levels.begin(), levels.end(), [layer](const TopologyLevel& level) {
    return level.layer == layer;
  });
  return it == levels.end() ? nullptr : &*it;
}

std::optional<int> NetworkLayerOf(std::string_view label_key) {
  if (!label_key.starts_with(kNetworkNodeLayerPrefix)) return std::nullopt;
  const std::string_view layer = label_key.substr(kNetworkNodeLayerPrefix.size());
  if (layer.empty() || layer.front() == '0') return std::nullopt;
  int number = 0;
  const auto [end, error] = std::from_chars(layer.data(), layer.data() + layer.size(), number);
  if (error != std::errc() || end != layer.data() + layer.size() || number < 1 ||
      number > kMaxNetworkLayer) {
    return std::nullopt;
  }
  return number;
}

std::string NetworkLayerLabel(int layer) {
  return std::string(kNetworkNodeLayerPrefix) + std::to_string(layer);
}

std::string NetworkLayerName(int layer) { return "network-node-layer-" + std::to_string(layer); }

NodeTopology ReadNodeTopology(const Json& labels) {
  NodeTopology topology;
  if (!labels.is_object()) return topology;
  for (const auto& [key, value] : labels.items()) {
    if (!value.is_string() || value.get_ref<const std::string&>().empty()) continue;
    if (key == kUltraServerLabel) {
      topology.ultraserver = value.get<std::string>();
    } else if (const auto layer = NetworkLayerOf(key)) {
      topology.levels.push_back({*layer, key, value.get<std::string>()});
    }
  }
  std::sort(topology.levels.begin(), topology.levels.end(),
            [](const TopologyLevel& a, const TopologyLevel& b) { return a.layer < b.layer; });
  return topology;
}

std::string ClosestNetworkBlock(const Json& labels) {
  const NodeTopology topology = ReadNodeTopology(labels);
  const TopologyLevel* deepest = topology.Deepest();
  return deepest == nullptr ? "" : deepest->block;
}

}  // namespace ncclguard::core
