#include "core/placement.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <vector>

namespace ncclguard::core {
namespace {

// A message names at most this many blocks, and this many runs of the rank order.
constexpr std::size_t kListedBlocks = 4;
constexpr std::size_t kListedRuns = 6;

std::optional<long> IndexLabel(const Json& labels, std::string_view key) {
  const auto it = labels.find(std::string(key));
  if (it == labels.end() || !it->is_string()) return std::nullopt;
  const std::string& text = it->get_ref<const std::string&>();
  long value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

std::string Count(std::size_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

// "3-5" or "3".
std::string RankRange(std::size_t first, std::size_t last) {
  return first == last ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(last);
}

// The deepest layer every node carries, 0 when they share none.
int CommonLayer(const std::map<std::string, NodeTopology, std::less<>>& nodes) {
  std::set<int> common;
  bool first = true;
  for (const auto& [name, topology] : nodes) {
    std::set<int> layers;
    for (const TopologyLevel& level : topology.levels) layers.insert(level.layer);
    if (first) {
      common = std::move(layers);
      first = false;
      continue;
    }
    std::erase_if(common, [&layers](int layer) { return !layers.contains(layer); });
  }
  return common.empty() ? 0 : *common.rbegin();
}

// ", in one UltraServer u-1" / ", across 2 UltraServers" when every node carries one.
std::string UltraServers(const std::map<std::string, NodeTopology, std::less<>>& nodes) {
  std::set<std::string> servers;
  for (const auto& [name, topology] : nodes) {
    if (topology.ultraserver.empty()) return "";
    servers.insert(topology.ultraserver);
  }
  if (servers.size() == 1) return ", in one UltraServer " + *servers.begin();
  return ", across " + std::to_string(servers.size()) + " UltraServers";
}

// "; rank order interleaves blocks: ranks 0-1 nn-a, 2 nn-b, 3 nn-a" when the ranks in order go
// back to a block they left; "" when every pod's rank is known and each block's ranks are
// consecutive, or some pod has none.
std::string RankOrder(std::span<const PlacedPod> pods,
                      const std::map<std::string, NodeTopology, std::less<>>& nodes, int layer,
                      bool& interleaved) {
  std::vector<const PlacedPod*> ranked;
  for (const PlacedPod& pod : pods) {
    if (!pod.rank) return "";
    ranked.push_back(&pod);
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const PlacedPod* a, const PlacedPod* b) { return *a->rank < *b->rank; });
  struct Run {
    std::string block;
    std::size_t first = 0;
    std::size_t last = 0;
  };
  std::vector<Run> runs;
  for (std::size_t rank = 0; rank < ranked.size(); ++rank) {
    const std::string& block = nodes.find(ranked[rank]->node)->second.At(layer)->block;
    if (!runs.empty() && runs.back().block == block) {
      runs.back().last = rank;
    } else {
      runs.push_back({block, rank, rank});
    }
  }
  std::set<std::string_view> blocks;
  for (const Run& run : runs) blocks.insert(run.block);
  interleaved = runs.size() > blocks.size();
  if (!interleaved) return "";
  std::string text = "; rank order interleaves blocks: ranks ";
  for (std::size_t i = 0; i < runs.size() && i < kListedRuns; ++i) {
    text += (i == 0 ? "" : ", ") + RankRange(runs[i].first, runs[i].last) + " " + runs[i].block;
  }
  if (runs.size() > kListedRuns) {
    text += ", and " + Count(runs.size() - kListedRuns, "more run", "more runs");
  }
  return text;
}

}  // namespace

std::optional<RankKey> RankKeyOf(const Json& pod_labels, std::span<const std::string_view> roles) {
  if (!pod_labels.is_object()) return std::nullopt;
  if (const auto index = IndexLabel(pod_labels, kReplicaIndexLabel)) {
    const auto type = pod_labels.find(std::string(kReplicaTypeLabel));
    const std::string role =
        type != pod_labels.end() && type->is_string() ? type->get<std::string>() : std::string();
    long place = 0;
    while (static_cast<std::size_t>(place) < roles.size() &&
           roles[static_cast<std::size_t>(place)] != role) {
      ++place;
    }
    return RankKey{place, 0, *index};
  }
  auto job = IndexLabel(pod_labels, kJobSetGlobalIndexLabel);
  if (!job) job = IndexLabel(pod_labels, kJobSetJobIndexLabel);
  const auto pod = IndexLabel(pod_labels, kCompletionIndexLabel);
  if (!job && !pod) return std::nullopt;
  return RankKey{0, job.value_or(0), pod.value_or(0)};
}

Placement JudgePlacement(std::span<const PlacedPod> pods,
                         const std::function<NodeTopology(std::string_view)>& topology_of) {
  Placement placement;
  std::map<std::string, NodeTopology, std::less<>> nodes;
  for (const PlacedPod& pod : pods) {
    if (!nodes.contains(pod.node)) nodes.emplace(pod.node, topology_of(pod.node));
  }
  placement.nodes = nodes.size();
  const std::string head =
      Count(pods.size(), "pod", "pods") + " on " + Count(nodes.size(), "node", "nodes");
  placement.layer = CommonLayer(nodes);
  if (placement.layer == 0) {
    placement.reason = kPlacementNoTopologyLabels;
    std::vector<std::string> bare;
    for (const auto& [name, topology] : nodes) {
      if (topology.levels.empty()) bare.push_back(name);
    }
    if (bare.size() == nodes.size()) {
      placement.message = head + "; no node carries a " + std::string(kNetworkNodeLayerPrefix) +
                          "N label (EKS and SageMaker HyperPod set them), so the network blocks "
                          "they span are not known";
    } else if (!bare.empty()) {
      placement.message = head + "; " + Count(bare.size(), "node carries", "nodes carry") + " no " +
                          std::string(kNetworkNodeLayerPrefix) + "N label (" + bare.front() +
                          (bare.size() > 1 ? ", ..." : "") +
                          "), so the network blocks the pods span are not known";
    } else {
      placement.message = head +
                          "; the nodes carry no network-node-layer in common, so the "
                          "network blocks the pods span are not known";
    }
    return placement;
  }
  // Block -> its nodes, at the common layer.
  std::map<std::string, std::set<std::string_view>, std::less<>> blocks;
  for (const auto& [name, topology] : nodes)
    blocks[topology.At(placement.layer)->block].insert(name);
  placement.blocks = blocks.size();
  const std::string level = NetworkLayerName(placement.layer);
  if (blocks.size() == 1) {
    placement.verdict = PlacementVerdict::OneBlock;
    placement.reason = kPlacementOneBlock;
    placement.message =
        head + " in one " + level + " block " + blocks.begin()->first + UltraServers(nodes);
    return placement;
  }
  placement.verdict = PlacementVerdict::Spread;
  placement.reason = kPlacementSpread;
  std::vector<std::pair<std::string_view, std::size_t>> sizes;
  for (const auto& [block, members] : blocks) sizes.emplace_back(block, members.size());
  std::stable_sort(sizes.begin(), sizes.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string message = head + " in " + std::to_string(blocks.size()) + " " + level + " blocks: ";
  for (std::size_t i = 0; i < sizes.size() && i < kListedBlocks; ++i) {
    message += (i == 0 ? "" : ", ") + std::string(sizes[i].first) + " " +
               Count(sizes[i].second, "node", "nodes");
  }
  if (sizes.size() > kListedBlocks)
    message += ", and " + std::to_string(sizes.size() - kListedBlocks) + " more";
  // The deepest layer above that still holds them all, where one does.
  for (int layer = placement.layer - 1; layer >= 1; --layer) {
    std::set<std::string_view> above;
    bool all = true;
    for (const auto& [name, topology] : nodes) {
      const TopologyLevel* at = topology.At(layer);
      if (at == nullptr) {
        all = false;
        break;
      }
      above.insert(at->block);
    }
    if (all && above.size() == 1) {
      message +=
          " (one " + NetworkLayerName(layer) + " block, " + std::string(*above.begin()) + ")";
      break;
    }
  }
  message += UltraServers(nodes);
  message += RankOrder(pods, nodes, placement.layer, placement.interleaved);
  placement.message = std::move(message);
  return placement;
}

}  // namespace ncclguard::core
