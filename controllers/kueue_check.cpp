#include "controllers/kueue_check.h"

#include <algorithm>

#include "controllers/gate.h"
#include "controllers/json_fields.h"
#include "controllers/labels.h"
#include "core/contract.h"
#include "core/errors.h"
#include "core/kueue.h"

namespace ncclguard::controllers {
namespace {

// Kueue bounds an AdmissionCheckState message at 32768 characters; ours stay far below.
constexpr std::size_t kMaxMessageBytes = 4096;

const Json& Member(const Json& object, std::string_view key) {
  static const Json kNull;
  if (!object.is_object()) return kNull;
  const auto found = object.find(std::string(key));
  return found == object.end() ? kNull : *found;
}

const Json& StatusArray(const Json& object, std::string_view key) {
  static const Json kEmpty = Json::array();
  const Json& value = Member(Member(object, "status"), key);
  return value.is_array() ? value : kEmpty;
}

// The condition `type` of status.conditions, or null.
const Json* WorkloadCondition(const Json& object, std::string_view type) {
  for (const Json& condition : StatusArray(object, "conditions")) {
    if (condition.is_object() && StringField(condition, "type") == type) return &condition;
  }
  return nullptr;
}

bool ConditionTrue(const Json& object, std::string_view type) {
  const Json* condition = WorkloadCondition(object, type);
  return condition != nullptr && StringField(*condition, "status") == "True";
}

core::ObjectRef WorkloadRef(const Json& workload) {
  core::ObjectRef ref;
  ref.api_version = core::kKueueApiVersion;
  ref.kind = "Workload";
  ref.namespace_ = Meta(workload, "namespace");
  ref.name = Meta(workload, "name");
  ref.uid = Meta(workload, "uid");
  ref.resource = "workloads";
  return ref;
}

// One pod set: its pod template (with the assigned flavors' nodeLabels added to its
// nodeSelector, as Kueue does to the pods it admits) and its pod count.
struct PodSet {
  std::string name;
  core::PodTemplate tmpl;
};

// A copy of the Workload whose pod set templates carry their flavors' nodeLabels, and the pod
// sets. Throws core::InputError when the pod sets cannot be read.
std::vector<PodSet> AssignedPodSets(Json& workload, const KueueObjects& kueue) {
  Json& spec = workload["spec"];
  if (!spec.is_object()) throw core::InputError("spec: expected an object");
  Json& pod_sets = spec["podSets"];
  if (!pod_sets.is_array()) throw core::InputError("spec.podSets: expected a list");
  const Json& assignments =
      Member(Member(Member(workload, "status"), "admission"), "podSetAssignments");
  std::vector<PodSet> out;
  for (std::size_t i = 0; i < pod_sets.size(); ++i) {
    Json& pod_set = pod_sets[i];
    const std::string where = "spec.podSets[" + std::to_string(i) + "]";
    if (!pod_set.is_object()) throw core::InputError(where + ": expected an object");
    const std::string name = StringField(pod_set, "name");
    Json& pod_template = pod_set["template"];
    if (!pod_template.is_object()) throw core::InputError(where + ".template: expected an object");
    Json& template_spec = pod_template["spec"];
    if (!template_spec.is_object()) throw core::InputError(where + ".template.spec: missing");
    std::int64_t count = IntField(pod_set, "count", 1);
    if (assignments.is_array()) {
      for (const Json& assignment : assignments) {
        if (!assignment.is_object() || StringField(assignment, "name") != name) continue;
        count = IntField(assignment, "count", count);
        const Json& flavors = Member(assignment, "flavors");
        if (!flavors.is_object() || !kueue.flavor) continue;
        for (const auto& [resource, flavor_name] : flavors.items()) {
          if (!flavor_name.is_string()) continue;
          const auto flavor = kueue.flavor(flavor_name.get<std::string>());
          if (!flavor) continue;
          const Json& labels = Member(Member(*flavor, "spec"), "nodeLabels");
          if (!labels.is_object()) continue;
          Json& selector = template_spec["nodeSelector"];
          if (!selector.is_object()) selector = Json::object();
          for (const auto& [key, value] : labels.items()) selector[key] = value;
        }
      }
    }
    core::PodTemplate tmpl;
    tmpl.role = name;
    tmpl.pod_spec = core::JsonPointer("/spec/podSets/" + std::to_string(i) + "/template/spec");
    tmpl.pods = std::max<std::int64_t>(count, 0);
    out.push_back({name, tmpl});
  }
  return out;
}

// What our entry should say.
struct Answer {
  std::string state;
  std::string message;
  Json pod_set_updates;  // null: none
  std::optional<int> requeue_after_seconds;
  std::optional<std::chrono::seconds> recheck_after;
  std::vector<NodeDemand> waiting_for;  // ReconcileResult::waiting_for
};

// Audit mode (the Workload's namespace, core::ModeIn): Ready at once, with no podSetUpdates (the
// nodeSelector would hold the pods), saying what enforce mode would have answered.
Answer AuditAnswer(const Json& workload, const KueueObjects& kueue, const ClusterView& view) {
  const core::Policy& policy = view.Policy();
  std::string message;
  try {
    Json assigned = workload;
    std::vector<core::PodTemplate> templates;
    for (const PodSet& pod_set : AssignedPodSets(assigned, kueue)) {
      templates.push_back(pod_set.tmpl);
    }
    const std::vector<NodeDemand> demands = NodeDemands(assigned, templates, policy);
    const GateVerdict verdict =
        policy.gate.enabled ? EvaluateGate(demands, view, policy)
                            : GateVerdict{true, "GateDisabled", "the NcclPolicy disables the gate"};
    message = verdict.release ? "audit mode: " + verdict.message
                              : "audit mode: ncclguard would hold this Workload until enough "
                                "validated nodes exist, and did not: " +
                                    verdict.message;
  } catch (const std::exception& e) {
    message = std::string("audit mode: ncclguard cannot read the Workload's pod sets (") +
              e.what() + "); enforce mode would hold it until they are fixed";
  }
  return {
      std::string(core::kCheckReady), std::move(message), nullptr, std::nullopt, std::nullopt, {}};
}

Answer Decide(const Json& workload, const KueueObjects& kueue, const ClusterView& view,
              Timestamp now) {
  const core::Policy& policy = view.Policy();
  if (NamespaceMode(view, Meta(workload, "namespace")) == core::Mode::Audit) {
    return AuditAnswer(workload, kueue, view);
  }
  Json assigned = workload;
  std::vector<PodSet> pod_sets;
  std::vector<NodeDemand> demands;
  try {
    pod_sets = AssignedPodSets(assigned, kueue);
    std::vector<core::PodTemplate> templates;
    for (const PodSet& pod_set : pod_sets) templates.push_back(pod_set.tmpl);
    demands = NodeDemands(assigned, templates, policy);
  } catch (const std::exception& e) {  // InputError, or a JSON type error from a bad field
    return {std::string(core::kCheckPending),
            std::string("ncclguard cannot read the Workload's pod sets: ") + e.what(),
            nullptr,
            std::nullopt,
            std::nullopt,
            {}};
  }
  GateVerdict verdict;
  if (!policy.gate.enabled) {
    verdict = {true, "GateDisabled", "the NcclPolicy disables the gate"};
  } else {
    verdict = EvaluateGate(demands, view, policy);
  }
  if (verdict.release) {
    Json updates = Json::array();
    for (const PodSet& pod_set : pod_sets) {
      if (!policy.gate.enabled || NodeDemands(assigned, {pod_set.tmpl}, policy).empty()) continue;
      updates.push_back({{"name", pod_set.name},
                         {"nodeSelector", {{std::string(core::kValidatedNodeLabel), "true"}}}});
    }
    return {std::string(core::kCheckReady),
            verdict.message,
            updates.empty() ? Json(nullptr) : std::move(updates),
            std::nullopt,
            std::nullopt,
            {}};
  }
  const Json* reserved = WorkloadCondition(workload, core::kKueueQuotaReserved);
  const auto since =
      reserved != nullptr ? ParseTime(StringField(*reserved, "lastTransitionTime")) : std::nullopt;
  const std::chrono::seconds hold{policy.gate.hold_timeout_seconds};
  const Timestamp start = since && *since <= now ? *since : now;
  if (now - start >= hold) {
    return {std::string(core::kCheckRetry),
            "not enough validated nodes within the hold timeout (" + std::to_string(hold.count()) +
                "s); quota released, retrying in " +
                std::to_string(policy.gate.retry_after_seconds) + "s: " + verdict.message,
            nullptr,
            policy.gate.retry_after_seconds,
            std::nullopt,
            {}};
  }
  return {std::string(core::kCheckPending),
          verdict.message,
          nullptr,
          std::nullopt,
          hold - (now - start),
          std::move(demands)};
}

// Our entry as it should be applied, or null when the current one says it already.
Json EntryToApply(const Json& current, const std::string& name, const Answer& answer,
                  Timestamp now) {
  const std::string state = StringField(current, "state");
  const std::string message = TruncateUtf8(answer.message, kMaxMessageBytes);
  const Json& updates = Member(current, "podSetUpdates");
  const bool same_updates = answer.pod_set_updates.is_null()
                                ? (updates.is_null() || (updates.is_array() && updates.empty()))
                                : updates == answer.pod_set_updates;
  const Json& requeue = Member(current, "requeueAfterSeconds");
  const bool same_requeue =
      !answer.requeue_after_seconds ||
      (requeue.is_number_integer() && requeue.get<std::int64_t>() == *answer.requeue_after_seconds);
  if (state == answer.state && StringField(current, "message") == message && same_updates &&
      same_requeue) {
    return nullptr;
  }
  Json entry{{"name", name},
             {"state", answer.state},
             {"message", message},
             {"lastTransitionTime",
              state == answer.state ? StringField(current, "lastTransitionTime", FormatTime(now))
                                    : FormatTime(now)}};
  if (!answer.pod_set_updates.is_null()) entry["podSetUpdates"] = answer.pod_set_updates;
  if (answer.requeue_after_seconds) entry["requeueAfterSeconds"] = *answer.requeue_after_seconds;
  return entry;
}

}  // namespace

std::optional<AdmissionCheckKey> AdmissionCheckKey::Parse(std::string_view text) {
  if (text.empty() || text.find('/') != std::string_view::npos) return std::nullopt;
  return AdmissionCheckKey{std::string(text)};
}

std::optional<WorkloadKey> WorkloadKey::Parse(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == text.size() ||
      text.find('/', slash + 1) != std::string_view::npos) {
    return std::nullopt;
  }
  return WorkloadKey{std::string(text.substr(0, slash)), std::string(text.substr(slash + 1))};
}

bool IsPreflightCheck(const Json& admission_check) {
  return StringField(Member(admission_check, "spec"), "controllerName") ==
         core::kPreflightCheckController;
}

ReconcileResult ReconcileAdmissionCheck(const std::optional<Json>& admission_check, Timestamp now) {
  ReconcileResult result;
  if (!admission_check || !IsPreflightCheck(*admission_check)) return result;
  const std::int64_t generation = IntField(Member(*admission_check, "metadata"), "generation");
  const Json* active = WorkloadCondition(*admission_check, core::kKueueActive);
  if (active != nullptr && StringField(*active, "status") == "True" &&
      IntField(*active, "observedGeneration") == generation) {
    return result;
  }
  const bool was_true = active != nullptr && StringField(*active, "status") == "True";
  Json condition{
      {"type", std::string(core::kKueueActive)},
      {"status", "True"},
      {"reason", "Active"},
      {"message", "ncclguard's controller answers this check from its node validations"},
      {"observedGeneration", generation},
      {"lastTransitionTime",
       was_true ? StringField(*active, "lastTransitionTime", FormatTime(now)) : FormatTime(now)}};
  core::ObjectRef ref;
  ref.api_version = core::kKueueApiVersion;
  ref.kind = "AdmissionCheck";
  ref.name = Meta(*admission_check, "name");
  ref.resource = "admissionchecks";
  result.actions.push_back(
      ApplyObject{ref, true, std::string(kKueueFieldManager),
                  Json{{"apiVersion", std::string(core::kKueueApiVersion)},
                       {"kind", "AdmissionCheck"},
                       {"metadata", {{"name", ref.name}}},
                       {"status", {{"conditions", Json::array({condition})}}}}});
  return result;
}

bool HasPendingCheck(const Json& workload, const std::vector<std::string>& checks) {
  for (const Json& entry : StatusArray(workload, "admissionChecks")) {
    if (!entry.is_object() || StringField(entry, "state") != core::kCheckPending) continue;
    if (std::find(checks.begin(), checks.end(), StringField(entry, "name")) != checks.end()) {
      return true;
    }
  }
  return false;
}

ReconcileResult ReconcileWorkloadChecks(const std::optional<Json>& workload,
                                        const KueueObjects& kueue, const ClusterView& view,
                                        Timestamp now) {
  ReconcileResult result;
  if (!workload || !workload->is_object()) return result;
  // Kueue owns the entries until quota is reserved, while it evicts the Workload (it resets
  // them to Pending before it releases the quota) and after the Workload finished.
  if (!ConditionTrue(*workload, core::kKueueQuotaReserved) ||
      ConditionTrue(*workload, core::kKueueEvicted) ||
      ConditionTrue(*workload, core::kKueueFinished)) {
    return result;
  }
  Json entries = Json::array();
  std::optional<Answer> answer;
  for (const Json& current : StatusArray(*workload, "admissionChecks")) {
    if (!current.is_object()) continue;
    const std::string name = StringField(current, "name");
    const auto& ours = kueue.preflight_checks;
    if (std::find(ours.begin(), ours.end(), name) == ours.end()) continue;
    // Ready stays Ready while the quota is held (turning it back evicts a running job); Retry
    // and Rejected are Kueue's to act on: it resets the entry to Pending when it requeues.
    if (StringField(current, "state") != core::kCheckPending) continue;
    if (!answer) answer = Decide(*workload, kueue, view, now);
    Json entry = EntryToApply(current, name, *answer, now);
    if (!entry.is_null()) entries.push_back(std::move(entry));
  }
  if (answer && answer->recheck_after) result.requeue_after = answer->recheck_after;
  if (answer) result.waiting_for = answer->waiting_for;
  if (entries.empty()) return result;
  const core::ObjectRef ref = WorkloadRef(*workload);
  result.actions.push_back(
      ApplyObject{ref, true, std::string(kKueueFieldManager),
                  Json{{"apiVersion", std::string(core::kKueueApiVersion)},
                       {"kind", "Workload"},
                       {"metadata", {{"name", ref.name}, {"namespace", ref.namespace_}}},
                       {"status", {{"admissionChecks", std::move(entries)}}}}});
  return result;
}

}  // namespace ncclguard::controllers
