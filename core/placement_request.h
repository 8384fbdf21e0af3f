// What ncclguard asks the schedulers for, so that a job's pods land close together in the network
// (docs/operator.md, "Placement"; guide section 19): for a job Kueue queues on a flavor with a
// Topology, Kueue's own topology request on each pod template; for a job no queue holds, a pod
// affinity on the closest network block among the job's own pods. The rule topology-placement
// (core/rules/topology_placement.cpp) writes them; this file chooses the level. Pure.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "core/policy.h"
#include "core/topology.h"

namespace ncclguard::core {

struct Workload;

// Kueue's topology requests on a pod template (kueue.x-k8s.io v1beta2): any of them is the user's
// own choice, which ncclguard never overrides.
inline constexpr std::string_view kKueuePreferredTopologyAnnotation =
    "kueue.x-k8s.io/podset-preferred-topology";
inline constexpr std::string_view kKueueRequiredTopologyAnnotation =
    "kueue.x-k8s.io/podset-required-topology";
inline constexpr std::string_view kKueuePodSetGroupAnnotation = "kueue.x-k8s.io/podset-group-name";
inline constexpr std::array<std::string_view, 5> kKueueTopologyAnnotations{
    kKueuePreferredTopologyAnnotation, kKueueRequiredTopologyAnnotation,
    "kueue.x-k8s.io/podset-unconstrained-topology", "kueue.x-k8s.io/podset-slice-required-topology",
    kKueuePodSetGroupAnnotation};
// The group ncclguard names both pod sets of a job of two (a Master and its Workers), so that
// Kueue places them in one block together.
inline constexpr std::string_view kPlacementPodSetGroup = "ncclguard-ranks";

// What a managed job's placement request is: where the webhook knows the cluster (the in-process
// webhook, from the controller's caches); null elsewhere (the CLI, the standalone webhook).
struct PlacementRequest {
  PlacementMode mode = PlacementMode::Preferred;
  // The job (or the pod's job) is queued by Kueue: Kueue places it, so no pod affinity is added.
  bool queued_by_kueue = false;
  // The levels (node label keys, the farthest first) of the Topology its queue's flavors name;
  // empty where no flavor of the queue names one (Kueue then places the pods as it would).
  std::vector<std::string> kueue_levels;
  // A pod: the label its job's operator puts on every pod of the job, and the job's name, which
  // the pod affinity selects; the job as messages name it ("PyTorchJob train").
  std::string job_label;
  std::string job_name;
  std::string job;
  // Pods of the job (0: unknown), for whether it fits one UltraServer.
  std::int64_t job_pods = 0;
};

// The request for `object` (a job or a Pod) created in `namespace_` with the mode in force there
// (PlacementModeIn); nullopt when there is nothing to ask for.
using PlacementLookup = std::function<std::optional<PlacementRequest>(
    const Json& object, const Workload& workload, std::string_view namespace_,
    PlacementMode policy_mode)>;

// Whether a pod template's metadata (its annotations) carries any of Kueue's topology requests.
bool HasKueueTopologyRequest(const Json* template_metadata);

// Whether a pod spec already says where its pods go among each other or the network: a pod
// affinity or anti-affinity, a topology spread constraint, or a nodeSelector or node affinity on
// a topology label (core/topology.h). The user's choice: no affinity is added.
bool HasOwnPlacement(const Json& pod_spec);

// The level Kueue is asked for among `levels` (a Topology's node labels, farthest first):
// topology.k8s.aws/ultraserver-id where the Topology lists it, the type has UltraServers and the
// job fits one (`job_pods` <= the most nodes of the type seen under one); else the deepest
// network-node-layer the Topology lists that the type's nodes carry (any, when the type is not
// known); else, in a Topology of other labels, its deepest level that is not
// kubernetes.io/hostname. nullopt when none is left.
std::optional<std::string> KueueTopologyLevel(const std::vector<std::string>& levels,
                                              const InstanceType* type, std::int64_t job_pods);

// The level a pod affinity among a job's pods is asked on: the type's UltraServer when its job
// fits one, else the deepest network-node-layer its nodes carry (the learned catalog,
// InstanceType::topology_levels); for a type not known, the deepest level every labelled type of
// `policy` carries when they agree. nullopt when no level is known.
std::optional<std::string> AffinityTopologyLevel(const Policy& policy, const InstanceType* type,
                                                 std::int64_t job_pods);

// The pod affinity term (podAffinityTerm) for a job's pods on `level`.
Json JobAffinityTerm(std::string_view job_label, std::string_view job_name, std::string_view level);

}  // namespace ncclguard::core
