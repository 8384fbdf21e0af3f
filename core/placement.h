// Where a running job's pods landed in the network (docs/operator.md, "Placement"): how many nodes
// and closest network blocks (core/topology.h) its bound pods span, and whether its ranks in order
// interleave across those blocks. The training-job controller's NcclPlacement condition. Pure.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/json.h"
#include "core/topology.h"

namespace ncclguard::core {

// The labels the job operators put on pods that say a pod's index, read for the rank order:
// Kubeflow's training operator (replica type and index within it), JobSet (the child Job's index,
// global across replicated Jobs where set) and an Indexed batch Job (also inside a JobSet).
inline constexpr std::string_view kReplicaTypeLabel = "training.kubeflow.org/replica-type";
inline constexpr std::string_view kReplicaIndexLabel = "training.kubeflow.org/replica-index";
inline constexpr std::string_view kJobSetGlobalIndexLabel = "jobset.sigs.k8s.io/job-global-index";
inline constexpr std::string_view kJobSetJobIndexLabel = "jobset.sigs.k8s.io/job-index";
inline constexpr std::string_view kCompletionIndexLabel =
    "batch.kubernetes.io/job-completion-index";
inline constexpr std::array<std::string_view, 5> kPodIndexLabels{
    kReplicaTypeLabel, kReplicaIndexLabel, kJobSetGlobalIndexLabel, kJobSetJobIndexLabel,
    kCompletionIndexLabel};

// Where a pod sorts in its job's rank order: {replica type's place in `roles` (the kind's
// rank-0 roles, core/kinds.h; others after them), child Job index, pod index}. nullopt when the
// pod carries no index label (or one that is not a whole number).
using RankKey = std::array<long, 3>;
std::optional<RankKey> RankKeyOf(const Json& pod_labels, std::span<const std::string_view> roles);

// A bound pod of a job: its name, its node, and its rank key where it has one.
struct PlacedPod {
  std::string name;
  std::string node;
  std::optional<RankKey> rank;
};

enum class PlacementVerdict { OneBlock, Spread, NoTopologyLabels };

struct Placement {
  PlacementVerdict verdict = PlacementVerdict::NoTopologyLabels;
  std::string_view reason;  // "OneBlock", "Spread", "NoTopologyLabels"
  std::string message;      // at most a few blocks and runs named, whatever the job's size
  int layer = 0;            // the layer judged at: the deepest every node of the job carries
  std::size_t nodes = 0;
  std::size_t blocks = 0;
  bool interleaved = false;  // ranks 0..N-1 in order leave a block and come back to it
};

inline constexpr std::string_view kPlacementOneBlock = "OneBlock";
inline constexpr std::string_view kPlacementSpread = "Spread";
inline constexpr std::string_view kPlacementNoTopologyLabels = "NoTopologyLabels";

// How `pods` are placed. `topology_of(node)`: what that node's labels say (core/topology.h).
// Judged at the deepest layer every node carries: OneBlock when one block holds them all, Spread
// when several do, NoTopologyLabels when a node carries no layer (or the nodes share none).
// The rank order is judged when every pod has a rank key.
Placement JudgePlacement(std::span<const PlacedPod> pods,
                         const std::function<NodeTopology(std::string_view)>& topology_of);

}  // namespace ncclguard::core
