#include "controllers/training_job_reconciler.h"

#include <algorithm>
#include <map>
#include <optional>

#include "controllers/conditions.h"
#include "controllers/diagnosis.h"
#include "controllers/gate.h"
#include "controllers/json_fields.h"
#include "controllers/labels.h"
#include "controllers/nccl_health.h"
#include "controllers/rendezvous_service.h"
#include "core/catalog.h"
#include "core/contract.h"
#include "core/errors.h"
#include "core/gate.h"
#include "core/guide.h"
#include "core/image_pin.h"
#include "core/placement.h"
#include "core/reason.h"
#include "core/rendezvous.h"

namespace ncclguard::controllers {
namespace {

constexpr std::chrono::seconds kMinGateRequeue{10};
constexpr std::chrono::seconds kMaxGateRequeue{300};
constexpr std::size_t kMaxEventNote = 1024;  // events.k8s.io/v1 limit
constexpr std::string_view kInsufficientNodes = "insufficient-validated-nodes";
// The NcclDiagnosis message: "<top id>: <its first line> (also: <id>, <id>) — see <link>".
constexpr std::string_view kAlsoOpen = " (also: ";
constexpr std::string_view kAlsoSeparator = ", ";

std::string Link(const core::Policy& policy, std::string_view slug) {
  return core::GuideLink(policy.guide_base_url, slug);
}

std::string NoteOf(const Json& event) {
  std::string note = StringField(event, "note");
  return note.empty() ? StringField(event, "message") : note;
}

std::string BoundedNote(std::string note) { return TruncateUtf8(std::move(note), kMaxEventNote); }

// Whether one of the pod's ownerReferences is of `kind`.
bool OwnedBy(const Json& pod, std::string_view kind) {
  const auto metadata = pod.find("metadata");
  if (metadata == pod.end() || !metadata->is_object()) return false;
  const auto owners = metadata->find("ownerReferences");
  if (owners == metadata->end() || !owners->is_array()) return false;
  return std::any_of(owners->begin(), owners->end(),
                     [&](const Json& owner) { return StringField(owner, "kind") == kind; });
}

// Whether a pod that carries info.pod_job_label is a job of info's kind: the label's only kind;
// among kinds sharing the label, the first a pod's owner names, else the one marked the fallback,
// else each of them (a TrainJob's pods and a JobSet's are both owned by Jobs and labelled with the
// JobSet's name: the reconcile of the kind that has no job of that name does nothing).
bool OwnsLabelledPod(const core::KindInfo& info, const Json& pod) {
  const auto kinds = core::ManagedKinds();
  const auto shares_label = [&](const core::KindInfo& other) {
    return other.pod_job_label == info.pod_job_label;
  };
  if (std::count_if(kinds.begin(), kinds.end(), shares_label) == 1) return true;
  const core::KindInfo* owner = nullptr;
  const core::KindInfo* fallback = nullptr;
  for (const core::KindInfo& other : kinds) {
    if (!shares_label(other)) continue;
    if (owner == nullptr && OwnedBy(pod, other.kind_name)) owner = &other;
    if (other.pod_label_fallback) fallback = &other;
  }
  if (owner == nullptr && fallback == nullptr) return true;
  return (owner != nullptr ? owner : fallback) == &info;
}

// Everything one reconcile of one job works with.
class JobReconcile {
 public:
  JobReconcile(const JobKey& key, const Json& job, const ClusterView& view, Timestamp now)
      : key_(key),
        info_(core::KindInfoOf(key.kind)),
        job_(job),
        working_(job),
        view_(view),
        policy_(view.Policy()),
        now_(now),
        job_events_(view.EventsAbout(key.namespace_, info_.kind_name, key.name)) {
    ref_ = ObjectRef{.api_version = StringField(job, "apiVersion", info_.api_version),
                     .kind = std::string(info_.kind_name),
                     .namespace_ = key.namespace_,
                     .name = key.name,
                     .uid = Meta(job, "uid"),
                     .resource = std::string(info_.resource)};
  }

  ReconcileResult Run() {
    const auto gate = Annotation(job_, core::kGateAnnotation);
    const bool pending = gate == std::string(core::kGatePending);
    const bool managed = Managed();
    // Pods the webhook gated while the job is not held (recreated after the release, or a job
    // Kueue queues, or one created before the gate) are let go at once.
    if (!pending) UngatePods();
    if (!managed && !pending) return Finish();

    ReadSpec();
    if (managed) EnsureService();
    audit_ = managed && NamespaceMode(view_, key_.namespace_) == core::Mode::Audit;
    std::optional<GateVerdict> held;
    if (pending) {
      held = Gate(managed);
      if (release_only_) return Finish();
    } else if (gate == std::string(core::kGateAdmitted)) {
      RepairAdmittedCondition();
    } else if (audit_ && !gate) {
      ReportWouldHold();
    }
    if (spec_error_) {
      if (!pending) {
        SetCondition({std::string(core::kPreflightCondition), "Unknown", "SpecUnreadable",
                      SpecErrorMessage(), std::nullopt});
      }
      Event("Warning", "SpecUnreadable", "Validate",
            SpecErrorMessage() + "; `ncclguard lint` on the manifest reports the same");
    }
    if (managed) DiagnoseFailures(held ? &*held : nullptr);
    return Finish();
  }

 private:
  bool Managed() const {
    const auto ns = view_.Namespace(key_.namespace_);
    if (!ns || Label(*ns, core::kEnabledNamespaceLabel) != std::string("true")) return false;
    return core::IsManagedJob(job_, key_.kind);
  }

  void ReadSpec() {
    try {
      // A TrainJob's pods are its runtime's: their GPUs and instance type are read there.
      demands_ =
          NodeDemands(job_, policy_, [this](const core::RuntimeRef& ref, std::string_view ns) {
            return view_.Runtime(ref, ns);
          });
      // Required in one network block: the gate counts the validated nodes per block.
      if (NamespacePlacement(view_, key_.namespace_) == core::PlacementMode::Required) {
        for (NodeDemand& demand : demands_) demand.one_block = true;
      }
      master_addr_ = core::MasterAddress(job_, policy_.cluster_domain);
    } catch (const core::InputError& e) {
      spec_error_ = e.what();
    }
  }

  std::string SpecErrorMessage() const {
    return "ncclguard cannot read the job's spec (" + *spec_error_ +
           "); it neither validates nor gates this job until the spec is fixed";
  }

  void EnsureService() {
    if (!info_.ncclguard_makes_service) return;
    if (ref_.uid.empty()) return;  // not yet persisted: no owner reference possible
    const Json desired = DesiredService(job_, key_.kind, policy_, master_addr_);
    const std::string name = desired["metadata"]["name"].get<std::string>();
    const auto existing = view_.Service(key_.namespace_, name);
    const ObjectRef service{.api_version = "v1",
                            .kind = "Service",
                            .namespace_ = key_.namespace_,
                            .name = name,
                            .uid = "",
                            .resource = "services"};
    switch (CompareService(existing, desired, job_)) {
      case ServiceStanding::Missing:
        service_actions_.push_back(CreateObject{service, desired});
        break;
      case ServiceStanding::Drifted:
        service_actions_.push_back(MergePatch{service, false, ServicePatch(*existing, desired)});
        break;
      case ServiceStanding::Serving:
        break;
      case ServiceStanding::NotOwned:
        Event("Warning", "RendezvousServiceConflict", "Rendezvous",
              "Service " + name + " exists and is not owned by this " +
                  std::string(info_.kind_name) +
                  "; ncclguard leaves it alone. Ranks that use MASTER_ADDR=" +
                  master_addr_.value_or("<rank-0 pod>." + name) +
                  " reach this job only if that Service selects its pods \u2014 see " +
                  Link(policy_, "dns-rendezvous"));
        break;
    }
  }

  // Returns the verdict when the gate keeps holding the job.
  std::optional<GateVerdict> Gate(bool managed) {
    GateVerdict verdict;
    if (!managed) {
      verdict = {true, "NotManaged",
                 "the namespace is no longer opted in to ncclguard; released without node "
                 "validation"};
    } else if (!policy_.gate.enabled) {
      verdict = {true, "GateDisabled", "the NcclPolicy disables the gate; released"};
    } else if (spec_error_) {
      verdict = {true, "SpecUnreadable", SpecErrorMessage()};
    } else if (audit_) {
      // Held before its namespace (or the policy) turned to audit: audit mode holds nothing.
      const GateVerdict would = EvaluateGate(demands_, view_, policy_);
      verdict = {
          true, std::string(kReleasedForAudit),
          "audit mode: ncclguard holds nothing in this namespace; released" +
              (would.release ? "; " + would.message
                             : " although enforce mode would still hold it: " + would.message)};
    } else {
      verdict = EvaluateGate(demands_, view_, policy_);
    }
    if (!verdict.release) {
      SetCondition({std::string(core::kPreflightCondition), "False", verdict.reason,
                    verdict.message, std::nullopt});
      result_.requeue_after = GateBackoff();
      result_.waiting_for = demands_;
      return verdict;
    }
    Json patch = Json::object();
    patch["metadata"]["annotations"][std::string(core::kGateAnnotation)] = core::kGateAdmitted;
    // Released from this read of the job, or not at all: a reconcile over a cache that has not
    // seen an earlier release yet (the job pending still, at the version of that release's own
    // status patch) gets a Conflict, not a second release (counted twice). The executor moves
    // the version past this reconcile's own status patch.
    if (const std::string version = Meta(job_, "resourceVersion"); !version.empty()) {
      patch["metadata"]["resourceVersion"] = version;
    }
    if (core::PodGated(info_)) {
      UngatePods();  // all of the job's pods at once, before the job says it was released
    } else {
      patch[JsonPointer(std::string(info_.suspend_field))] = false;
    }
    release_ = MergePatch{ref_, false, std::move(patch)};
    const auto preflight = FindCondition(job_, core::kPreflightCondition);
    const bool held_condition = preflight && preflight->status == "False";
    // A job the gate held for its nodes is released by that write alone: a repaired rack
    // releases a hundred such jobs within seconds, each waiting for its release and for nothing
    // else, and a worker that also wrote the condition and the Event would reach the next release
    // three round trips later. The release's own watch event queues the job again, and that
    // reconcile writes the condition and the Admitted Event as this one would have
    // (RepairAdmittedCondition).
    if (held_condition && managed && policy_.gate.enabled && !spec_error_ && !audit_) {
      release_only_ = true;
      return std::nullopt;
    }
    const std::string status = verdict.reason == "SpecUnreadable" ? "Unknown" : "True";
    // A job that was visibly held gets an Event for its release; one released at its first look
    // has only the condition (an Event per job would cost every admission a write and say
    // nothing the condition does not). Held shows in the condition, or in the hold Event.
    const auto hold_event = [](const Json& e) {
      return StringField(e, "reason") == core::ReasonFromId(kInsufficientNodes);
    };
    const bool was_held =
        held_condition || std::any_of(job_events_.begin(), job_events_.end(), hold_event);
    SetCondition({std::string(core::kPreflightCondition), status, verdict.reason, verdict.message,
                  std::nullopt});
    if (was_held) TellOfRelease(verdict.message);
    return std::nullopt;
  }

  // The Admitted Event, unless one about the job exists already.
  void TellOfRelease(const std::string& message) {
    const auto admitted_event = [](const Json& e) {
      return StringField(e, "reason") == "Admitted";
    };
    if (std::any_of(job_events_.begin(), job_events_.end(), admitted_event)) return;
    Event("Normal", "Admitted", "Release",
          "released by the ncclguard gate" + (message.empty() ? "" : ": " + message));
  }

  // Audit mode, a job the webhook did not mark (nothing is held): what the gate would have done,
  // in its NcclPreflight condition and, when it would have held the job, an Event. Nothing is
  // suspended, released or requeued; the condition follows the nodes whenever the job is
  // reconciled again.
  void ReportWouldHold() {
    if (!policy_.gate.enabled || spec_error_) return;
    const GateVerdict verdict = EvaluateGate(demands_, view_, policy_);
    if (verdict.release) {
      SetCondition({std::string(core::kPreflightCondition), "True", verdict.reason,
                    "audit mode: " + verdict.message, std::nullopt});
      return;
    }
    const std::string message =
        "audit mode: ncclguard would hold this job until enough validated nodes exist, and did "
        "not: " +
        verdict.message;
    SetCondition({std::string(core::kPreflightCondition), "False", std::string(kWouldHold), message,
                  std::nullopt});
    Event("Warning", std::string(kWouldHold), "Audit", message);
  }

  ObjectRef PodRef(const Json& pod) const {
    return ObjectRef{.api_version = "v1",
                     .kind = "Pod",
                     .namespace_ = key_.namespace_,
                     .name = Meta(pod, "name"),
                     .uid = Meta(pod, "uid"),
                     .resource = "pods"};
  }

  // Removes the pod-level gate (core/gate.h) from each of the job's pods that has it. The patch
  // carries the pod's resourceVersion: scheduling gates can only be removed, and a stale list
  // would put back one another controller lifted meanwhile (a Conflict reads again).
  void UngatePods() {
    if (!core::PodGated(info_) || info_.pod_job_label.empty()) return;
    for (const Json& pod : view_.PodsWithLabel(key_.namespace_, info_.pod_job_label, key_.name)) {
      if (!core::HasSchedulingGate(pod, core::kSchedulingGate)) continue;
      Json patch{{"spec",
                  {{"schedulingGates", core::SchedulingGatesWithout(pod, core::kSchedulingGate)}}}};
      if (!Meta(pod, "resourceVersion").empty()) {
        patch["metadata"]["resourceVersion"] = Meta(pod, "resourceVersion");
      }
      pod_releases_.push_back(MergePatch{PodRef(pod), false, std::move(patch)});
    }
  }

  // Requeue a held job after as long as it has been held (so the checks back off
  // exponentially), within [10 s, 5 min]. Node and NodeValidation changes requeue it sooner.
  std::chrono::seconds GateBackoff() const {
    const auto preflight = FindCondition(job_, core::kPreflightCondition);
    if (!preflight || preflight->status != "False" || !preflight->last_transition_time) {
      return kMinGateRequeue;
    }
    const auto since = ParseTime(*preflight->last_transition_time);
    if (!since || *since > now_) return kMinGateRequeue;
    return std::clamp(std::chrono::duration_cast<std::chrono::seconds>(now_ - *since),
                      kMinGateRequeue, kMaxGateRequeue);
  }

  // The release patch landed but the condition did not (its answer lost, a Conflict with the
  // operator starting the job, a restart): say so now, and tell of the release, once. The Event
  // comes after the condition patch, which names the version read: a cache that has seen the
  // release but not yet the condition written after it gets a Conflict, not a second Event.
  void RepairAdmittedCondition() {
    const auto preflight = FindCondition(job_, core::kPreflightCondition);
    if (preflight && preflight->status == "False") {
      // As the release would have written it (the count now, which released it a moment ago).
      const GateVerdict now = EvaluateGate(demands_, view_, policy_);
      SetCondition({std::string(core::kPreflightCondition), "True",
                    now.release ? now.reason : std::string("Admitted"),
                    now.release ? now.message : std::string("released by the ncclguard gate"),
                    std::nullopt});
      TellOfRelease(now.release ? now.message : "");
    } else if (!preflight && !spec_error_ && !audit_) {
      // Admitted at creation (the gate's fast path: its validated nodes existed), never held:
      // the condition says so, with the count as it stands now.
      const GateVerdict now = EvaluateGate(demands_, view_, policy_);
      SetCondition({std::string(core::kPreflightCondition), "True",
                    now.release ? now.reason : std::string(kAdmittedAtCreation),
                    "admitted at creation, not held: " + now.message, std::nullopt});
    }
  }

  void DiagnoseFailures(const GateVerdict* held) {
    const std::vector<Json> pods =
        view_.PodsWithLabel(key_.namespace_, info_.pod_job_label, key_.name);
    RecordImageDigests(pods);
    if (held == nullptr) ReportPlacement(pods);
    std::vector<Json> events = job_events_;
    std::map<std::string, Json, std::less<>> validations;
    for (const Json& pod : pods) {
      const std::string pod_name = Meta(pod, "name");
      for (Json& e : view_.EventsAbout(key_.namespace_, "Pod", pod_name)) {
        events.push_back(std::move(e));
      }
      const auto spec = pod.find("spec");
      const std::string node = spec != pod.end() ? StringField(*spec, "nodeName") : "";
      if (!node.empty() && !validations.contains(node)) {
        if (auto v = view_.NodeValidation(node)) validations.emplace(node, std::move(*v));
      }
    }
    std::vector<PodLogDigest> digests;
    for (const Json& pod : pods) {
      for (PodLogDigest& d : view_.PodLogs(key_.namespace_, Meta(pod, "name"))) {
        digests.push_back(std::move(d));
      }
    }
    std::vector<LogFinding> log_findings;
    for (const PodLogDigest& d : digests) {
      log_findings.insert(log_findings.end(), d.findings.begin(), d.findings.end());
    }
    SetTransport(digests);
    const DiagnosisContext context{job_, pods, events, validations, held, &log_findings};
    const std::vector<DiagnosisFinding> findings = Diagnose(context);
    if (held == nullptr) ReadRasHealth(pods, validations, findings);

    for (const DiagnosisFinding& f : findings) {
      const DiagnosisInfo& d = f.diagnosis->Info();
      std::string note;
      for (const std::string& line : f.lines) note += (note.empty() ? "" : "; ") + line;
      Event("Warning", core::ReasonFromId(d.id), "Diagnose",
            std::string(d.id) + ": " + note + ". " + std::string(d.remedy) + " \u2014 see " +
                Link(policy_, f.slug),
            std::string(d.id));
    }

    if (!findings.empty()) {
      const DiagnosisFinding& first = findings.front();
      const DiagnosisInfo& top = first.diagnosis->Info();
      std::string message = std::string(top.id) + ": " + findings.front().lines.front();
      if (findings.size() > 1) {
        for (std::size_t i = 1; i < findings.size(); ++i) {
          message += i == 1 ? kAlsoOpen : kAlsoSeparator;
          message += findings[i].diagnosis->Info().id;
        }
        message += ")";
      }
      message += " \u2014 see " + Link(policy_, first.slug);
      SetCondition({std::string(core::kDiagnosisCondition), "True", core::ReasonFromId(top.id),
                    message, std::nullopt});
      return;
    }
    // Diagnoses stay when their evidence goes (failed pods are often deleted), except the gate's,
    // which is over once the job is released.
    // The kebab-case reason is how versions before UpperCamelCase reasons wrote it.
    const auto current = FindCondition(working_, core::kDiagnosisCondition);
    if (current && current->status == "True" &&
        (current->reason == core::ReasonFromId(kInsufficientNodes) ||
         current->reason == kInsufficientNodes) &&
        held == nullptr) {
      SetCondition({std::string(core::kDiagnosisCondition), "False", "Resolved",
                    "enough validated nodes; the ncclguard gate released the job", std::nullopt});
    }
  }

  // The image pin (core/image_pin.h): the digests the job's first pods run, recorded on the job
  // for the webhook to pin its later pods to. The patch names the version it was worked out
  // from: a cache that has not seen a record yet gets a Conflict and reads again, never
  // overwriting a record with a later pod's digest.
  void RecordImageDigests(const std::vector<Json>& pods) {
    std::vector<core::ImagePin> recorded;
    if (const auto annotation = Annotation(job_, core::kImageDigestsAnnotation)) {
      try {
        recorded = core::ReadImagePins(*annotation);
      } catch (const core::InputError& e) {
        Event("Warning", "ImageDigestsUnreadable", "PinImages",
              "annotation " + std::string(core::kImageDigestsAnnotation) + " is unreadable (" +
                  e.what() +
                  "); ncclguard records the digests the job's pods run anew \u2014 see " +
                  Link(policy_, "nccl-version"));
      }
    }
    const auto next = core::RecordImagePins(recorded, pods);
    if (!next) return;
    Json patch = Json::object();
    patch["metadata"]["annotations"][std::string(core::kImageDigestsAnnotation)] =
        next->empty() ? Json(nullptr) : Json(core::WriteImagePins(*next));
    if (const std::string version = Meta(job_, "resourceVersion"); !version.empty()) {
      patch["metadata"]["resourceVersion"] = version;
    }
    digests_ = MergePatch{ref_, false, std::move(patch)};
  }

  // NCCL's RAS (guide section 9): one running pod of the job carries the reader label, which the
  // probe on its node queries; NcclHealth says what the probe last read there.
  void ReadRasHealth(const std::vector<Json>& pods,
                     const std::map<std::string, Json, std::less<>>& validations,
                     const std::vector<DiagnosisFinding>& findings) {
    const auto runs_ranks = [this](const Json& pod) {
      return core::RunsRanks(info_, Label(pod, kReplicaTypeLabel).value_or(""));
    };
    const std::optional<std::string> reader =
        policy_.ras_reads ? PickRasReader(pods, runs_ranks) : std::nullopt;
    const Json* labelled = nullptr;
    for (const Json& pod : pods) {
      const bool marked = Label(pod, core::kRasReaderLabel) == std::string("true");
      const bool wanted = reader && Meta(pod, "name") == *reader;
      if (marked && wanted) labelled = &pod;
      if (marked == wanted) continue;
      Json labels{{std::string(core::kRasReaderLabel), wanted ? Json("true") : Json(nullptr)}};
      pod_releases_.push_back(
          MergePatch{PodRef(pod), false, Json{{"metadata", {{"labels", std::move(labels)}}}}});
    }
    if (labelled == nullptr) return;
    std::vector<std::string> views;
    for (const DiagnosisFinding& f : findings) {
      for (const std::string& line : f.lines)
        views.push_back(std::string(f.diagnosis->Info().id) + ": " + line);
    }
    auto wanted =
        NcclHealthCondition(pods, *labelled, validations, Link(policy_, "nccl-ras"), views);
    if (!wanted) return;
    const auto current = FindCondition(working_, core::kHealthCondition);
    const bool changed =
        !current || current->status != wanted->status || current->reason != wanted->reason;
    if (changed && wanted->status != "Unknown") {
      Event(wanted->status == "True" ? "Normal" : "Warning", wanted->reason, "ReadRas",
            wanted->message);
    }
    SetCondition(*wanted);
  }

  // NcclPlacement (docs/operator.md, "Placement"): the network blocks the job's running pods
  // span, once every one of them is bound to a node; said again only when it changes. An Event
  // for OneBlock and Spread, none for NoTopologyLabels (a cluster without the labels stays quiet).
  void ReportPlacement(const std::vector<Json>& pods) {
    std::vector<core::PlacedPod> placed;
    for (const Json& pod : pods) {
      const auto status = pod.find("status");
      const std::string phase = status != pod.end() ? StringField(*status, "phase") : "";
      if (phase == "Succeeded" || phase == "Failed") continue;
      if (!core::RunsRanks(info_, Label(pod, kReplicaTypeLabel).value_or(""))) continue;
      const auto spec = pod.find("spec");
      std::string node = spec != pod.end() ? StringField(*spec, "nodeName") : "";
      if (node.empty()) return;  // not all placed yet: judged once they are
      const auto metadata = pod.find("metadata");
      const Json labels = metadata != pod.end() && metadata->is_object()
                              ? metadata->value("labels", Json::object())
                              : Json::object();
      placed.push_back(
          {Meta(pod, "name"), std::move(node), core::RankKeyOf(labels, info_.rank_zero.roles)});
    }
    if (placed.empty()) return;
    const core::Placement placement =
        core::JudgePlacement(placed, [this](std::string_view name) -> core::NodeTopology {
          const auto node = view_.Node(name);
          if (!node || !node->is_object()) return {};
          const auto metadata = node->find("metadata");
          if (metadata == node->end() || !metadata->is_object()) return {};
          return core::ReadNodeTopology(metadata->value("labels", Json::object()));
        });
    const bool one_block = placement.verdict == core::PlacementVerdict::OneBlock;
    const bool spread = placement.verdict == core::PlacementVerdict::Spread;
    std::string message = placement.message;
    if (spread) message += " \u2014 see " + Link(policy_, "advanced-tuning");
    const Condition wanted{
        std::string(core::kPlacementCondition), one_block ? "True" : (spread ? "False" : "Unknown"),
        std::string(placement.reason), BoundedNote(std::move(message)), std::nullopt};
    const auto current = FindCondition(working_, core::kPlacementCondition);
    const bool changed = !current || current->status != wanted.status ||
                         current->reason != wanted.reason || current->message != wanted.message;
    if (changed && wanted.status != "Unknown") {
      Event(one_block ? "Normal" : "Warning", wanted.reason, "Place", wanted.message);
    }
    SetCondition(wanted);
  }

  // NcclTransport from what the pods' logs said: Socket when any container uses sockets (the job
  // runs at their speed), else EFA when one uses EFA, else Unknown. Not set before a log is read.
  void SetTransport(const std::vector<PodLogDigest>& digests) {
    if (digests.empty()) return;
    const PodLogDigest* chosen = nullptr;
    for (const NcclTransportKind kind : {NcclTransportKind::Socket, NcclTransportKind::Efa}) {
      for (const PodLogDigest& d : digests) {
        if (chosen == nullptr && d.transport.kind == kind) chosen = &d;
      }
    }
    const std::string link = Link(policy_, "efa-tcp-fallback");
    if (chosen == nullptr) {
      SetCondition({std::string(core::kTransportCondition), "Unknown", "Unknown",
                    "no pod's log says which network NCCL uses (it prints it with "
                    "NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,NET) \u2014 see " +
                        link,
                    std::nullopt});
      return;
    }
    const TransportVerdict& v = chosen->transport;
    std::string message = "pod " + chosen->subject + ": " + v.why;
    if (!v.plugin_version.empty()) message += " (" + v.plugin_version + ")";
    if (!v.evidence.empty()) message += "; log: \"" + v.evidence.front().text + "\"";
    message += " \u2014 see " + link;
    const bool efa = v.kind == NcclTransportKind::Efa;
    SetCondition({std::string(core::kTransportCondition), efa ? "True" : "False",
                  std::string(TransportName(v.kind)), BoundedNote(std::move(message)),
                  std::nullopt});
  }

  void SetCondition(const Condition& wanted) {
    if (auto list = WithCondition(working_, wanted, info_.condition_style, now_)) {
      working_["status"]["conditions"] = std::move(*list);
      status_changed_ = true;
    }
  }

  // Events are de-duplicated against those already recorded about the job: the same reason and
  // note is said once (until the API server expires it).
  // `diagnosis`: the id of the diagnosis the Event reports, kept in its ncclguard.io/diagnosis
  // annotation (the reason is the id in UpperCamelCase).
  void Event(std::string type, std::string reason, std::string action, std::string note,
             std::string diagnosis = "") {
    note = BoundedNote(std::move(note));
    const auto said = [&](const Json& e) {
      return StringField(e, "reason") == reason && NoteOf(e) == note;
    };
    if (std::any_of(job_events_.begin(), job_events_.end(), said)) return;
    for (const RecordEvent& e : events_) {
      if (e.reason == reason && e.note == note) return;
    }
    RecordEvent event{ref_, std::move(type), std::move(reason), std::move(action), std::move(note),
                      {}};
    if (!diagnosis.empty()) event.annotations.emplace(core::kDiagnosisAnnotation, diagnosis);
    events_.push_back(std::move(event));
  }

  ReconcileResult Finish() {
    for (Action& a : service_actions_) result_.actions.push_back(std::move(a));
    // The release is the first write after the Service: it is what the submitter waits for, and
    // every write before it would be one more round trip to the API server on the job's way to
    // its pods. The pods first: a job marked admitted whose pod patch failed still has its pods
    // let go (Run ungates the pods of a job that is not pending).
    for (MergePatch& p : pod_releases_) result_.actions.push_back(std::move(p));
    if (release_) result_.actions.push_back(std::move(*release_));
    if (digests_) result_.actions.push_back(std::move(*digests_));
    // The status patch carries the resourceVersion it was computed from (a Conflict means the job
    // changed: read again; after a release the executor sends it with the version the release
    // made). A release whose condition was lost (a Conflict, the answer lost, a restart) is
    // repaired by the next reconcile (RepairAdmittedCondition).
    if (status_changed_) {
      Json patch{{"metadata", {{"resourceVersion", Meta(job_, "resourceVersion")}}},
                 {"status", {{"conditions", working_["status"]["conditions"]}}}};
      if (Meta(job_, "resourceVersion").empty()) patch.erase("metadata");
      result_.actions.push_back(MergePatch{ref_, true, std::move(patch)});
    }
    // Events last: after a Conflict nothing more is sent, and the next reconcile says it again
    // (the Admitted Event with the repaired condition). One that fails is sent again before the
    // next reconcile.
    for (RecordEvent& e : events_) result_.actions.push_back(std::move(e));
    return std::move(result_);
  }

  const JobKey& key_;
  const core::KindInfo& info_;
  const Json& job_;
  Json working_;  // the job with the conditions this reconcile sets
  const ClusterView& view_;
  const core::Policy& policy_;
  Timestamp now_;
  std::vector<Json> job_events_;
  ObjectRef ref_;

  std::vector<NodeDemand> demands_;
  std::optional<std::string> master_addr_;
  std::optional<std::string> spec_error_;
  bool audit_ = false;  // managed, in a namespace in audit mode

  std::vector<Action> service_actions_;
  std::optional<MergePatch> release_;
  bool release_only_ = false;  // the release is this reconcile's one write to the job
  std::vector<MergePatch> pod_releases_;
  std::optional<MergePatch> digests_;  // the image pin's record (RecordImageDigests)
  std::vector<RecordEvent> events_;
  bool status_changed_ = false;
  ReconcileResult result_;
};

}  // namespace

ReconcileResult ReconcileTrainingJob(const JobKey& key, const ClusterView& view, Timestamp now) {
  const auto job = view.Job(key);
  // Deleted: the Service goes with it (owner reference). Being deleted: nothing to start.
  if (!job || !job->is_object() || !Meta(*job, "deletionTimestamp").empty()) return {};
  return JobReconcile(key, *job, view, now).Run();
}

std::vector<std::string> DiagnosesNamed(const core::Json& job) {
  std::vector<std::string> ids;
  const auto condition = FindCondition(job, core::kDiagnosisCondition);
  if (!condition || condition->status != "True") return ids;
  const std::string_view message = condition->message;
  const auto add = [&ids](std::string_view id) {
    if (DiagnosisRegistry::Find(id) == nullptr) return;
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.emplace_back(id);
  };
  add(message.substr(0, message.find(": ")));
  // The last "(also:" is the condition's own: a line quoted before it may hold anything.
  const auto also = message.rfind(kAlsoOpen);
  if (also == std::string_view::npos) return ids;
  std::string_view list = message.substr(also + kAlsoOpen.size());
  list = list.substr(0, list.find(')'));
  while (!list.empty()) {
    const auto separator = list.find(kAlsoSeparator);
    add(list.substr(0, separator));
    if (separator == std::string_view::npos) break;
    list.remove_prefix(separator + kAlsoSeparator.size());
  }
  return ids;
}

bool GatePending(const core::Json& job) {
  return Annotation(job, core::kGateAnnotation) == std::string(core::kGatePending);
}

std::vector<JobKey> JobKeysForPod(const core::Json& pod) {
  std::vector<JobKey> keys;
  const std::string ns = Meta(pod, "namespace");
  if (ns.empty()) return keys;
  for (const core::KindInfo& info : core::ManagedKinds()) {
    auto name = Label(pod, info.pod_job_label);
    if (name && OwnsLabelledPod(info, pod)) keys.push_back({info.kind, ns, std::move(*name)});
  }
  return keys;
}

}  // namespace ncclguard::controllers
