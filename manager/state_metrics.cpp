#include "manager/state_metrics.h"

#include <algorithm>
#include <memory>
#include <set>
#include <string_view>
#include <utility>

#include "controllers/conditions.h"
#include "controllers/gate.h"
#include "controllers/json_fields.h"
#include "controllers/labels.h"
#include "controllers/training_job_reconciler.h"
#include "core/contract.h"

namespace ncclguard::manager {
namespace {

using core::Json;

// Counts by label values, as one gauge family. `label_names` in alphabetical order (as
// prometheus-cpp writes its own), each Add's values in the same order.
class Tally {
 public:
  Tally(std::string name, std::string help, std::vector<std::string> label_names)
      : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}

  void Add(std::vector<std::string> values, double by = 1) { counts_[std::move(values)] += by; }

  prometheus::MetricFamily Family() const {
    prometheus::MetricFamily family{name_, help_, prometheus::MetricType::Gauge, {}};
    for (const auto& [values, count] : counts_) {
      prometheus::ClientMetric metric;
      for (std::size_t i = 0; i < label_names_.size(); ++i) {
        metric.label.push_back({label_names_[i], values[i]});
      }
      metric.gauge.value = count;
      family.metric.push_back(std::move(metric));
    }
    return family;
  }

 private:
  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
  std::map<std::vector<std::string>, double> counts_;
};

// A label value this code did not write must not be unbounded text: an UpperCamelCase reason.
bool IsReason(std::string_view text) {
  if (text.empty() || text.size() > 64) return false;
  if (!std::isalpha(static_cast<unsigned char>(text.front()))) return false;
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; });
}

// A node check id as the probe writes it (kebab-case).
bool IsCheckId(std::string_view text) {
  if (text.empty() || text.size() > 63) return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

bool IsCheckStatus(std::string_view status) {
  return status == "Pass" || status == "Warn" || status == "Fail" || status == "Skip";
}

// The most checks one node's series may have: a NodeValidation written by hand cannot make more.
constexpr std::size_t kMaxChecksPerNode = 64;

const Json* ChecksOf(const Json& validation) {
  const auto status = validation.find("status");
  if (status == validation.end() || !status->is_object()) return nullptr;
  const auto checks = status->find("checks");
  return checks != status->end() && checks->is_array() ? &*checks : nullptr;
}

constexpr std::string_view kKueueStates[] = {"Pending", "Ready", "Rejected", "Retry"};

}  // namespace

EachObject EachIn(const kube::Informer& informer) {
  return [&informer](const ObjectVisitor& visit) { informer.ForEach(visit); };
}

FindObject FindIn(const kube::Informer& informer) {
  return [&informer](const std::string& name) { return informer.Get(name); };
}

EachObject EachOf(std::vector<kube::CachedObject> objects) {
  return [objects = std::move(objects)](const ObjectVisitor& visit) {
    for (const kube::CachedObject& object : objects) {
      if (object) visit(*object);
    }
  };
}

FindObject FindByName(const std::vector<kube::CachedObject>& objects) {
  auto by_name = std::make_shared<std::map<std::string, kube::CachedObject, std::less<>>>();
  for (const kube::CachedObject& object : objects) {
    if (object && object->is_object()) by_name->emplace(controllers::Meta(*object, "name"), object);
  }
  return [by_name](const std::string& name) -> kube::CachedObject {
    const auto found = by_name->find(name);
    return found != by_name->end() ? found->second : nullptr;
  };
}

std::vector<prometheus::MetricFamily> StateCollector::Collect() const {
  std::vector<prometheus::MetricFamily> families;
  if (active_ && !active_()) return families;
  for (const StateFamilies& build : builders_) build(families);
  return families;
}

void StateCollector::CollectText(std::string& out) const {
  if (active_ && !active_()) return;
  for (const StateText& write : writers_) write(out);
}

prometheus::MetricFamily HeldJobsFamily(const std::map<core::WorkloadKind, EachObject>& jobs) {
  Tally held("ncclguard_gate_held_jobs",
             "Jobs the gate holds now (ncclguard.io/gate=pending), by namespace, kind and the "
             "reason of their NcclPreflight=False condition (Pending: not judged yet).",
             {"kind", "namespace", "reason"});
  for (const auto& [kind, each] : jobs) {
    const std::string kind_name(core::KindInfoOf(kind).kind_name);
    each([&](const Json& job) {
      if (!job.is_object() || !controllers::GatePending(job)) return;
      std::string reason = "Pending";
      const auto preflight = controllers::FindCondition(job, core::kPreflightCondition);
      if (preflight && preflight->status == "False") {
        reason = IsReason(preflight->reason) ? preflight->reason : "Unknown";
      }
      held.Add({kind_name, controllers::Meta(job, "namespace"), std::move(reason)});
    });
  }
  return held.Family();
}

namespace {

// Jobs by the reason of their condition of `type`.
prometheus::MetricFamily JobsByConditionReason(const std::map<core::WorkloadKind, EachObject>& jobs,
                                               std::string_view type, const char* name,
                                               const char* help) {
  Tally tally(name, help, {"kind", "namespace", "reason"});
  for (const auto& [kind, each] : jobs) {
    const std::string kind_name(core::KindInfoOf(kind).kind_name);
    each([&](const Json& job) {
      if (!job.is_object()) return;
      const auto condition = controllers::FindCondition(job, type);
      if (!condition) return;
      tally.Add({kind_name, controllers::Meta(job, "namespace"),
                 IsReason(condition->reason) ? condition->reason : "Unknown"});
    });
  }
  return tally.Family();
}

}  // namespace

prometheus::MetricFamily NcclHealthFamily(const std::map<core::WorkloadKind, EachObject>& jobs) {
  return JobsByConditionReason(
      jobs, core::kHealthCondition, "ncclguard_job_nccl_health",
      "Jobs by the reason of their NcclHealth condition: what NCCL's RAS said when the probe last "
      "read them (Healthy, ProcessDead, RankError, CollectiveStuck, RankUnresponsive; RasWaiting, "
      "RasDisabled, RasUnanswered while not read).");
}

prometheus::MetricFamily PlacementFamily(const std::map<core::WorkloadKind, EachObject>& jobs) {
  return JobsByConditionReason(
      jobs, core::kPlacementCondition, "ncclguard_job_placement",
      "Jobs by the reason of their NcclPlacement condition: whether their running pods share one "
      "closest network block (OneBlock), span several (Spread), or sit on nodes without "
      "topology labels (NoTopologyLabels).");
}

void WriteNodeCheckStatus(const EachObject& validations, std::string& out) {
  metrics::TextFamily family("ncclguard_node_check_status",
                             "1 for each node check of each NodeValidation, labelled with its "
                             "current status (Pass, Warn, Fail, Skip).",
                             out);
  std::set<std::string, std::less<>> seen;
  validations([&](const Json& validation) {
    if (!validation.is_object()) return;
    const std::string node = controllers::Meta(validation, "name");
    const Json* list = ChecksOf(validation);
    if (node.empty() || list == nullptr) return;
    seen.clear();
    for (const Json& check : *list) {
      if (!check.is_object() || seen.size() >= kMaxChecksPerNode) continue;
      std::string id = controllers::StringField(check, "id");
      const std::string status = controllers::StringField(check, "status");
      if (!IsCheckId(id) || !IsCheckStatus(status) || seen.contains(id)) continue;
      family.Add({{"check", id}, {"node", node}, {"status", status}}, 1);
      seen.insert(std::move(id));
    }
  });
}

prometheus::MetricFamily NodesFamily(const EachObject& nodes, const FindObject& validation,
                                     const core::Policy& policy) {
  Tally tally(
      "ncclguard_nodes",
      "Nodes of the catalog's instance types by validation state (validated, failed, "
      "unvalidated, cordoned, unhealthy, and peer-failed or peer-untested for the checks between "
      "nodes).",
      {"instance_type", "state"});
  nodes([&](const Json& node) {
    if (!node.is_object()) return;
    const auto label = controllers::Label(node, core::kInstanceTypeLabel);
    if (!label) return;
    const core::InstanceType* type = policy.FindInstanceType(*label);
    if (type == nullptr) return;  // not a GPU type the catalog knows: nothing to validate
    const kube::CachedObject found = validation(controllers::Meta(node, "name"));
    const Json* verdict = found && found->is_object() ? found.get() : nullptr;
    const controllers::NodeStanding standing =
        controllers::StandingOf(node, verdict, policy, false);
    tally.Add({type->name, std::string(controllers::NodeStandingName(standing))});
  });
  return tally.Family();
}

prometheus::MetricFamily KueueChecksFamily(const EachObject& workloads,
                                           const std::vector<std::string>& checks) {
  Tally tally("ncclguard_kueue_admission_checks",
              "Entries of ncclguard's AdmissionChecks on Kueue Workloads, by state.", {"state"});
  for (const std::string_view state : kKueueStates) tally.Add({std::string(state)}, 0);
  workloads([&](const Json& workload) {
    if (!workload.is_object()) return;
    const auto status = workload.find("status");
    if (status == workload.end() || !status->is_object()) return;
    const auto entries = status->find("admissionChecks");
    if (entries == status->end() || !entries->is_array()) return;
    for (const Json& entry : *entries) {
      if (!entry.is_object()) continue;
      const std::string name = controllers::StringField(entry, "name");
      if (std::find(checks.begin(), checks.end(), name) == checks.end()) continue;
      const std::string state = controllers::StringField(entry, "state");
      if (std::find(std::begin(kKueueStates), std::end(kKueueStates), state) !=
          std::end(kKueueStates)) {
        tally.Add({state});
      }
    }
  });
  return tally.Family();
}

}  // namespace ncclguard::manager
