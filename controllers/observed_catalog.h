// The instance-type catalog learned from the cluster (docs/operator.md, "Instance type
// catalog"): what each type's nodes advertise in their capacity (the EFA and NVIDIA device
// plugins' vpc.amazonaws.com/efa and nvidia.com/gpu), published in the NcclPolicy's
// status.observedInstanceTypes, which the webhook, the gate and `lint --catalog` read.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "controllers/timestamps.h"
#include "core/json.h"
#include "core/policy.h"
#include "core/topology_audit.h"

namespace ncclguard::controllers {

// Per node.kubernetes.io/instance-type value, sorted by it: the most GPUs and EFA devices any of
// its nodes advertises (a node short of devices does not lower the type's count), how many nodes
// carry it, the first kMaxObservedNodeNames names, the network-node-layer labels its nodes carry
// (core/topology.h) and how many nodes lack one of them, and the most nodes under one UltraServer
// id. Nodes without GPUs are left out; a capacity that is not a count reads as 0. No observed_time.
std::vector<core::ObservedInstanceType> ObserveInstanceTypes(const std::vector<core::Json>& nodes);

// The same, a node at a time: for a cache visited one decoded node at a time (5,000 nodes held
// decoded at once, twice, were the controller's peak when a rack's nodes joined; BENCHMARKS.md).
class InstanceTypeObserver {
 public:
  void Add(const core::Json& node);
  std::vector<core::ObservedInstanceType> Result() &&;

 private:
  std::map<std::string, core::ObservedInstanceType> by_type_;
  std::map<std::string, std::vector<std::string>> names_;
  // Per type: its nodes by the network-node-layer numbers each carries.
  std::map<std::string, core::TopologyLevelCensus> levels_;
  // Per type: its nodes counted by UltraServer id.
  std::map<std::string, std::map<std::string, int>> ultra_servers_;
};

// The list the status should hold: `seen`, each entry keeping the observedTime of the entry of
// the same name in `published` when its GPU and EFA counts are the same (when they were first
// seen; nodes come and go), else stamped `now`. nullopt when it
// equals `published` (nothing to write).
std::optional<std::vector<core::ObservedInstanceType>> ObservedCatalogUpdate(
    std::vector<core::ObservedInstanceType> seen,
    const std::vector<core::ObservedInstanceType>& published, Timestamp now);

// The entries of `written` whose nodesMissingTopologyLevel is non-zero and not what `published`
// said of the type: what the controller logs as a warning once `written` is in the status (so once
// a change, not every reconcile).
std::vector<core::ObservedInstanceType> TopologyLevelChanges(
    const std::vector<core::ObservedInstanceType>& written,
    const std::vector<core::ObservedInstanceType>& published);

// Whether a Node change can change what ObserveInstanceTypes sees of it.
bool ObservedFieldsDiffer(const core::Json& before, const core::Json& after);

}  // namespace ncclguard::controllers
