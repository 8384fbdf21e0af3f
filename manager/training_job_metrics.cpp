#include "manager/training_job_metrics.h"

#include <algorithm>
#include <variant>

#include "controllers/conditions.h"
#include "controllers/json_fields.h"
#include "controllers/labels.h"
#include "controllers/training_job_reconciler.h"
#include "core/contract.h"
#include "core/kinds.h"

namespace ncclguard::manager {
namespace {

using core::Json;

bool Targets(const controllers::ObjectRef& target, const controllers::JobKey& key) {
  return target.kind == core::KindInfoOf(key.kind).kind_name &&
         target.namespace_ == key.namespace_ && target.name == key.name;
}

// The release patch: the gate annotation turned "admitted".
bool Releases(const controllers::MergePatch& patch) {
  if (patch.status_subresource || !patch.patch.is_object()) return false;
  const auto metadata = patch.patch.find("metadata");
  if (metadata == patch.patch.end() || !metadata->is_object()) return false;
  const auto annotations = metadata->find("annotations");
  if (annotations == metadata->end() || !annotations->is_object()) return false;
  return controllers::StringField(*annotations, core::kGateAnnotation) == core::kGateAdmitted;
}

// The job's conditions as the status patch writes them (the whole list), as a job to read them.
std::optional<Json> PatchedConditions(const controllers::MergePatch& patch) {
  if (!patch.status_subresource || !patch.patch.is_object()) return std::nullopt;
  const auto status = patch.patch.find("status");
  if (status == patch.patch.end() || !status->is_object()) return std::nullopt;
  const auto conditions = status->find("conditions");
  if (conditions == status->end() || !conditions->is_array()) return std::nullopt;
  return Json{{"status", {{"conditions", *conditions}}}};
}

std::optional<double> HeldSeconds(const Json& job, controllers::Timestamp now) {
  std::optional<controllers::Timestamp> since =
      controllers::ParseTime(controllers::Meta(job, "creationTimestamp"));
  if (!since) {
    const auto preflight = controllers::FindCondition(job, core::kPreflightCondition);
    if (preflight && preflight->status == "False" && preflight->last_transition_time) {
      since = controllers::ParseTime(*preflight->last_transition_time);
    }
  }
  if (!since) return std::nullopt;
  return std::chrono::duration<double>(now - *since).count();
}

std::optional<std::string> TransportReason(const Json& job) {
  const auto condition = controllers::FindCondition(job, core::kTransportCondition);
  if (!condition) return std::nullopt;
  return condition->reason;
}

}  // namespace

bool PatchesJob(const controllers::JobKey& key, const controllers::ReconcileResult& result) {
  return std::any_of(result.actions.begin(), result.actions.end(),
                     [&key](const controllers::Action& action) {
                       const auto* patch = std::get_if<controllers::MergePatch>(&action);
                       return patch != nullptr && Targets(patch->target, key);
                     });
}

JobChanges ChangesOf(const controllers::JobKey& key, const std::optional<Json>& job,
                     const controllers::ReconcileResult& result, controllers::Timestamp now,
                     std::size_t applied) {
  JobChanges changes;
  if (!job || !job->is_object()) return changes;
  const std::size_t count = std::min(applied, result.actions.size());
  for (std::size_t i = 0; i < count; ++i) {
    const controllers::Action& action = result.actions[i];
    const auto* patch = std::get_if<controllers::MergePatch>(&action);
    if (patch == nullptr || !Targets(patch->target, key)) continue;
    if (Releases(*patch)) {
      changes.released = true;
      changes.held_seconds = HeldSeconds(*job, now);
      continue;
    }
    const std::optional<Json> after = PatchedConditions(*patch);
    if (!after) continue;
    const std::vector<std::string> before = controllers::DiagnosesNamed(*job);
    for (std::string& id : controllers::DiagnosesNamed(*after)) {
      if (std::find(before.begin(), before.end(), id) == before.end()) {
        changes.new_diagnoses.push_back(std::move(id));
      }
    }
    const std::optional<std::string> transport = TransportReason(*after);
    if (transport && transport != TransportReason(*job)) changes.transport = transport;
  }
  return changes;
}

void Count(const JobChanges& changes, core::WorkloadKind kind, Metrics& metrics) {
  if (changes.released) metrics.CountRelease(kind, changes.held_seconds);
  for (const std::string& id : changes.new_diagnoses) metrics.CountDiagnosis(id);
  if (changes.transport) metrics.CountTransport(*changes.transport);
}

bool CountedVersions::First(const std::string& version) {
  std::lock_guard lock(mutex_);
  if (!seen_.insert(version).second) return false;
  order_.push_back(version);
  if (order_.size() > kKeep) {
    seen_.erase(order_.front());
    order_.pop_front();
  }
  return true;
}

}  // namespace ncclguard::manager
