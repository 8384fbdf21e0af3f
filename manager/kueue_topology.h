// What Kueue's topology-aware scheduling is set up to place (docs/operator.md, "Placement"): the
// Topology the flavors of a LocalQueue's ClusterQueue name, read from the shared caches that the
// controller `kueue-topology` declares (`ncclguard controller --kueue-topology`, the chart's
// kueue.topology.enabled). The in-process webhook asks Kueue for one block at its levels.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "manager/cache.h"

namespace ncclguard::manager {

// A resource of Kueue's API (kueue.x-k8s.io/v1beta2): "workloads", "topologies"...
kube::ResourceRef KueueResource(const char* plural, bool namespaced);

// The node labels (the farthest first) of the Topology that the flavors of LocalQueue `queue`
// in `namespace_` name: LocalQueue spec.clusterQueue, its ClusterQueue's
// spec.resourceGroups[].flavors[].name, each ResourceFlavor's spec.topologyName, the Topology's
// spec.levels[].nodeLabel. Where several flavors name Topologies, the levels all of them list
// (in the first one's order). nullopt when the queue, its ClusterQueue or any Topology is not
// known (the reads are off, or not synced), or no flavor names one.
std::optional<std::vector<std::string>> KueueTopologyLevels(const Caches& caches,
                                                            std::string_view namespace_,
                                                            std::string_view queue);

}  // namespace ncclguard::manager
