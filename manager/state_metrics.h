// The controller's state gauges, built from the informer caches each time they are scraped: the
// jobs the gate holds, nodes by instance type and validation state, each node's check statuses
// and the Kueue checks' states (docs/operator.md "Metrics"). Computed rather than kept: a series
// never outlives what it describes (a released job, a deleted NodeValidation, a check whose status
// changed), nothing is updated as the caches change, and nothing is held between scrapes. Only the
// leading replica reports them; a standby's caches would say the same twice.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/kinds.h"
#include "core/policy.h"
#include "kube/informer.h"

namespace ncclguard::manager {

// Appends the families it builds from the caches.
using StateFamilies = std::function<void(std::vector<prometheus::MetricFamily>& out)>;

class StateCollector final : public prometheus::Collectable {
 public:
  // `active`: whether to report now (this replica leads).
  explicit StateCollector(std::function<bool()> active) : active_(std::move(active)) {}
  // Before the collector is registered (manager/manager.cpp).
  void Add(StateFamilies build) { builders_.push_back(std::move(build)); }
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::function<bool()> active_;
  std::vector<StateFamilies> builders_;
};

// ncclguard_gate_held_jobs{namespace, kind, reason}: jobs marked ncclguard.io/gate=pending, by
// the reason of their NcclPreflight=False condition ("Pending" before the controller's first
// look). No series for a count of 0.
prometheus::MetricFamily HeldJobsFamily(
    const std::map<core::WorkloadKind, std::vector<kube::CachedObject>>& jobs);

// ncclguard_node_check_status{node, check, status} = 1 for each check of each NodeValidation
// (status Pass, Warn, Fail or Skip; an entry without a readable id and status is left out, and
// a node's second entry of one check id too).
prometheus::MetricFamily NodeCheckStatusFamily(const std::vector<kube::CachedObject>& validations);

// ncclguard_nodes{instance_type, state}: nodes of the catalog's instance types (the policy's:
// built-in, learned, the NcclPolicy's) by controllers::NodeStanding. No series for 0.
prometheus::MetricFamily NodesFamily(const std::vector<kube::CachedObject>& nodes,
                                     const std::vector<kube::CachedObject>& validations,
                                     const core::Policy& policy);

// ncclguard_kueue_admission_checks{state}: entries of `checks` (our AdmissionChecks' names) in
// the Workloads' status.admissionChecks by state, each of Pending, Ready, Retry and Rejected
// (0 included).
prometheus::MetricFamily KueueChecksFamily(const std::vector<kube::CachedObject>& workloads,
                                           const std::vector<std::string>& checks);

}  // namespace ncclguard::manager
