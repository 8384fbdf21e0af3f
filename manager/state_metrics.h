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
#include "metrics/registry.h"

namespace ncclguard::manager {

// Appends the families it builds from the caches.
using StateFamilies = std::function<void(std::vector<prometheus::MetricFamily>& out)>;
// Appends a family's exposition text (metrics::TextFamily): one of tens of thousands of series.
using StateText = std::function<void(std::string& out)>;

class StateCollector final : public metrics::TextCollectable {
 public:
  // `active`: whether to report now (this replica leads).
  explicit StateCollector(std::function<bool()> active) : active_(std::move(active)) {}
  // Before the collector is registered (manager/manager.cpp).
  void Add(StateFamilies build) { builders_.push_back(std::move(build)); }
  void AddText(StateText write) { writers_.push_back(std::move(write)); }
  std::vector<prometheus::MetricFamily> Collect() const override;
  void CollectText(std::string& out) const override;

 private:
  std::function<bool()> active_;
  std::vector<StateFamilies> builders_;
  std::vector<StateText> writers_;
};

// The objects a family is built from, visited one at a time: an informer's cache decodes each
// as it is visited (kube::Informer::ForEach), so a scrape never holds a cluster's NodeValidations
// decoded at once (5,000 of them were 70 MB of a scrape; BENCHMARKS.md, "Metrics").
using ObjectVisitor = std::function<void(const core::Json& object)>;
using EachObject = std::function<void(const ObjectVisitor& visit)>;
// One object by name (a NodeValidation by its node's), decoded when asked; null when absent.
using FindObject = std::function<kube::CachedObject(const std::string& name)>;

EachObject EachIn(const kube::Informer& informer);
FindObject FindIn(const kube::Informer& informer);
// The same over objects already decoded (tests; null entries are skipped).
EachObject EachOf(std::vector<kube::CachedObject> objects);
FindObject FindByName(const std::vector<kube::CachedObject>& objects);

// ncclguard_gate_held_jobs{namespace, kind, reason}: jobs marked ncclguard.io/gate=pending, by
// the reason of their NcclPreflight=False condition ("Pending" before the controller's first
// look). No series for a count of 0.
prometheus::MetricFamily HeldJobsFamily(const std::map<core::WorkloadKind, EachObject>& jobs);

// ncclguard_job_nccl_health{namespace, kind, reason}: jobs with an NcclHealth condition (what
// NCCL's RAS said when the probe last read them), by its reason. No series for a count of 0.
prometheus::MetricFamily NcclHealthFamily(const std::map<core::WorkloadKind, EachObject>& jobs);

// ncclguard_job_placement{namespace, kind, reason}: jobs with an NcclPlacement condition (the
// network blocks their running pods span, core/placement.h), by its reason (OneBlock, Spread,
// NoTopologyLabels). No series for a count of 0.
prometheus::MetricFamily PlacementFamily(const std::map<core::WorkloadKind, EachObject>& jobs);

// ncclguard_node_check_status{node, check, status} = 1 for each check of each NodeValidation
// (status Pass, Warn, Fail or Skip; an entry without a readable id and status is left out, and
// a node's second entry of one check id too).
// Written as text: 15 series a node.
void WriteNodeCheckStatus(const EachObject& validations, std::string& out);

// ncclguard_nodes{instance_type, state}: nodes of the catalog's instance types (the policy's:
// built-in, learned, the NcclPolicy's) by controllers::NodeStanding. No series for 0.
prometheus::MetricFamily NodesFamily(const EachObject& nodes, const FindObject& validation,
                                     const core::Policy& policy);

// ncclguard_kueue_admission_checks{state}: entries of `checks` (our AdmissionChecks' names) in
// the Workloads' status.admissionChecks by state, each of Pending, Ready, Retry and Rejected
// (0 included).
prometheus::MetricFamily KueueChecksFamily(const EachObject& workloads,
                                           const std::vector<std::string>& checks);

}  // namespace ncclguard::manager
