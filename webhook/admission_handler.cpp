#include "webhook/admission_handler.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

#include "core/contract.h"
#include "core/engine.h"
#include "core/errors.h"
#include "core/gate.h"
#include "core/image_ref.h"
#include "core/json_reader.h"
#include "core/kueue.h"
#include "core/rule.h"
#include "core/workload.h"
#include "memory/allocation_budget.h"

namespace ncclguard::webhook {
namespace {

// kube-apiserver truncates longer warnings; keep ours whole.
constexpr size_t kMaxWarningLength = 256;

// The only fix made to a job other than a TrainJob (core/placement_request.h).
constexpr std::string_view kPlacementRule = "topology-placement";

// What the controller's caches say of the object under review: the digests recorded for a Pod's
// job (AdmitOptions::image_pins) and where the pods are asked to go (AdmitOptions::placement);
// null where nothing is known.
struct Known {
  const core::JobImagePins* pins = nullptr;
  const core::PlacementRequest* placement = nullptr;
};

// head + message + tail within kMaxWarningLength, the message cut short ("...") where needed.
std::string FitWarning(const std::string& head, std::string message, const std::string& tail) {
  if (head.size() + message.size() + tail.size() > kMaxWarningLength) {
    const size_t room = kMaxWarningLength - std::min(kMaxWarningLength, head.size() + tail.size());
    message = message.substr(0, room > 3 ? room - 3 : 0) + "...";
  }
  return head + message + tail;
}

bool IsExempt(const AdmissionRequest& request, const AdmitOptions& options) {
  if (request.namespace_ == "kube-system") return true;
  return std::find(options.exempt_namespaces.begin(), options.exempt_namespaces.end(),
                   request.namespace_) != options.exempt_namespaces.end();
}

// Names the object for messages; must not throw, it also runs while reporting an error.
core::ObjectRef RefOf(const AdmissionRequest& request) {
  core::ObjectRef ref;
  try {
    ref = core::ObjectRef::From(request.object);
  } catch (const std::exception&) {
  }
  if (ref.kind.empty()) ref.kind = request.kind.kind;
  if (ref.namespace_.empty()) ref.namespace_ = request.namespace_;
  if (ref.name.empty()) ref.name = request.name;
  return ref;
}

std::vector<core::Finding> Select(const std::vector<core::Finding>& findings, core::Level level) {
  std::vector<core::Finding> selected;
  for (const auto& finding : findings) {
    if (finding.level == level) selected.push_back(finding);
  }
  return selected;
}

// On UPDATE only problems the update introduces count: a job admitted under an older policy
// must stay editable (the controller's own release patch is an UPDATE too).
std::vector<core::Finding> NewSince(std::vector<core::Finding> findings,
                                    const core::Json& old_object, const core::Policy& policy,
                                    const core::EvaluateOptions& options) {
  if (old_object.is_null()) return findings;
  std::set<std::pair<std::string, std::string>> before;
  try {
    for (const auto& finding : core::Evaluate(old_object, policy, options).findings) {
      before.emplace(finding.rule, finding.path);
    }
  } catch (const core::InputError&) {
    return findings;  // the old object was unreadable: judge the new one on its own
  }
  std::erase_if(findings, [&](const core::Finding& finding) {
    return before.contains({finding.rule, finding.path});
  });
  return findings;
}

// `gate`: the gate's fast path (AdmitOptions::gate), none in audit mode.
AdmissionOutcome Mutate(AdmissionRequest& request, const core::Workload& workload,
                        const core::Policy& policy, const core::GateLookup& gate,
                        const core::RuntimeLookup& runtimes, const Known& known) {
  AdmissionOutcome outcome;
  outcome.response.uid = request.uid;
  if (request.operation != "CREATE") {
    outcome.result = AdmitResult::Skipped;  // fixes that change a running pod are not ours
    return outcome;
  }
  if (workload.kind == core::WorkloadKind::Pod) {
    // A pod of a job kind that cannot be suspended is held here, by a scheduling gate the
    // controller lifts (core/gate.h); never one Kueue holds itself.
    const bool gate_pod = policy.gate.enabled && core::PodGatedJobOf(request.object) &&
                          !core::ManagedByKueue(request.object) &&
                          !core::HasSchedulingGate(request.object, core::kSchedulingGate);
    core::Json gate_ops =
        gate_pod ? core::PodSchedulingGatePatch(request.object) : core::Json::array();
    // The validating webhook checks the fixed pod; here only the fixes are needed.
    core::Evaluation evaluation = core::Evaluate(std::move(request.object), workload, policy,
                                                 {.pod_rules = true,
                                                  .job_rules = false,
                                                  .check_rules = false,
                                                  .image_pins = known.pins,
                                                  .placement = known.placement});
    const core::FreeJsonAtExit free_fixed(evaluation.fixed);
    outcome.findings = Select(evaluation.findings, core::Level::Fix);
    for (core::Json& op : gate_ops) evaluation.patch.push_back(std::move(op));
    if (!evaluation.patch.empty()) {
      outcome.response.patch = std::move(evaluation.patch);
      outcome.result = AdmitResult::Patched;
    }
    return outcome;
  }
  if (!core::KindInfoOf(workload.kind).job) {
    outcome.result = AdmitResult::Skipped;  // a runtime is checked, never changed
    return outcome;
  }
  core::Json ops = core::Json::array();
  // A TrainJob's fixes: ncclguard's runtime patch, what Trainer lets a patch say; its pods get
  // the rest (EFA devices, env) here when they are created.
  // Any other job's: only Kueue's topology request on its pod templates, which Kueue reads from
  // the job before any pod exists (core/placement_request.h).
  const bool kueue_placement = known.placement != nullptr && known.placement->queued_by_kueue &&
                               !known.placement->kueue_levels.empty();
  if ((workload.rendered || kueue_placement) && core::IsManagedJob(request.object, workload.kind)) {
    core::Evaluation evaluation =
        core::Evaluate(request.object, workload, policy,
                       {.pod_rules = true,
                        .job_rules = false,
                        .check_rules = false,
                        .placement = known.placement,
                        .only_rule = workload.rendered ? std::string_view() : kPlacementRule});
    outcome.findings = Select(evaluation.findings, core::Level::Fix);
    ops = std::move(evaluation.patch);
    request.object = std::move(evaluation.fixed);
  }
  // A job queued by Kueue is suspended and resumed by Kueue; the AdmissionCheck
  // ncclguard.io/preflight holds its Workload instead of the gate (unless the policy says not).
  const bool left_to_kueue = policy.gate.defer_to_kueue && core::QueuedByKueue(request.object);
  if (policy.gate.enabled && !left_to_kueue && core::IsManagedJob(request.object, workload.kind)) {
    // Enough validated nodes already: admitted as it is, no round trip through the controller.
    // A kind whose pods the gate holds keeps the held path (its pods are gated as they come).
    const bool admit_now = policy.gate.admit_when_ready && gate &&
                           !core::PodGated(core::KindInfoOf(workload.kind)) &&
                           gate(request.object, policy, runtimes);
    outcome.gate = admit_now ? GateDecision::Admitted : GateDecision::Held;
    for (core::Json& op : admit_now ? core::GateAdmitPatch(request.object)
                                    : core::GateMarkPatch(request.object, workload.kind)) {
      ops.push_back(std::move(op));
    }
  }
  if (!ops.empty()) {
    outcome.response.patch = std::move(ops);
    outcome.result = AdmitResult::Patched;
  }
  return outcome;
}

// Audit mode's Mutate: what enforce would have done (the fixes, the gate mark, the pod scheduling
// gate, a TrainJob's runtime patch) is worked out and dropped, so the object is admitted as it
// came. The validating webhook says what the fixes would have been (counting them here too would
// count a pod's twice).
AdmissionOutcome AuditMutate(AdmissionRequest& request, const core::Workload& workload,
                             const core::Policy& policy, const Known& known) {
  AdmissionOutcome outcome = Mutate(request, workload, policy, {}, {}, known);
  outcome.gate = GateDecision::None;
  if (outcome.result == AdmitResult::Patched) outcome.result = AdmitResult::Audited;
  outcome.response.patch = nullptr;
  outcome.findings.clear();
  return outcome;
}

// Audit mode's Validate: admitted as it came; every finding enforce mode would have acted on (a
// denial, a fix its pods would have got, a warning) is said, the denials first.
AdmissionOutcome Audited(AdmissionOutcome outcome, std::vector<core::Finding> findings) {
  const auto rank = [](core::Level level) {
    return level == core::Level::Deny ? 0 : level == core::Level::Fix ? 1 : 2;
  };
  std::stable_sort(findings.begin(), findings.end(),
                   [&](const core::Finding& a, const core::Finding& b) {
                     return rank(a.level) < rank(b.level);
                   });
  outcome.response.warnings = AuditWarnings(findings);
  outcome.result = findings.empty() ? AdmitResult::Allowed : AdmitResult::Audited;
  outcome.findings = std::move(findings);
  outcome.audit = true;
  return outcome;
}

AdmissionOutcome Validate(AdmissionRequest& request, const core::Workload& workload,
                          const core::Policy& policy, const core::ObjectRef& ref, bool audit,
                          const Known& known) {
  AdmissionOutcome outcome;
  outcome.response.uid = request.uid;
  const bool pod = workload.kind == core::WorkloadKind::Pod;
  if (pod && request.operation != "CREATE") {
    outcome.result = AdmitResult::Skipped;  // a pod's spec is fixed once created
    return outcome;
  }
  // The JobSet a TrainJob made was checked as the TrainJob; denying it would only break the
  // TrainJob's controller.
  if (!pod && core::ControlledByManagedJob(request.object)) {
    outcome.result = AdmitResult::Skipped;
    return outcome;
  }
  // A runtime is the template of every TrainJob that names it: what its pods would get wrong is
  // said as warnings, never denied (the admin who installs it is not the one who trains).
  const bool runtime = !pod && !core::KindInfoOf(workload.kind).job;
  const core::EvaluateOptions options{
      .pod_rules = true, .job_rules = !pod, .image_pins = known.pins, .placement = known.placement};
  core::Evaluation evaluation =
      core::Evaluate(std::move(request.object), workload, policy, options);
  const core::FreeJsonAtExit free_fixed(evaluation.fixed);
  std::vector<core::Finding> findings = std::move(evaluation.findings);
  if (request.operation == "UPDATE") {
    findings = NewSince(std::move(findings), request.old_object, policy, options);
  }
  // A runtime is only ever warned about, in either mode.
  if (audit && !runtime) return Audited(std::move(outcome), std::move(findings));

  std::vector<core::Finding> denies = Select(findings, core::Level::Deny);
  if (!denies.empty() && !runtime) {
    outcome.response.allowed = false;
    outcome.response.status_code = 403;
    outcome.response.status_reason = "Forbidden";
    outcome.response.message = DenialMessage(ref, denies);
    outcome.result = AdmitResult::Denied;
    outcome.findings = std::move(denies);
    return outcome;
  }
  // A pod that reaches validation still missing a fix was not mutated (mutating webhook
  // absent or skipped): say so. For jobs the fixes happen on their pods, so stay quiet.
  for (const auto& finding : findings) {
    if (runtime) {
      core::Finding shown = finding;
      shown.message = "every TrainJob using this runtime: " + finding.message;
      outcome.response.warnings.push_back(WarningText(shown));
      outcome.findings.push_back(std::move(shown));
    } else if (finding.level == core::Level::Warn || (pod && finding.level == core::Level::Fix)) {
      outcome.response.warnings.push_back(WarningText(finding));
      outcome.findings.push_back(finding);
    }
  }
  if (!outcome.response.warnings.empty()) outcome.result = AdmitResult::Warned;
  return outcome;
}

AdmissionOutcome Refuse(const AdmissionRequest& request, AdmitResult result, int code,
                        std::string reason, std::string message) {
  AdmissionOutcome outcome;
  outcome.response.uid = request.uid;
  outcome.response.allowed = false;
  outcome.response.status_code = code;
  outcome.response.status_reason = std::move(reason);
  outcome.response.message = std::move(message);
  outcome.result = result;
  return outcome;
}

// The digests recorded for the job of a Pod being created (the controller's caches), when any: a
// lookup that fails pins nothing (the pod is admitted as the rules alone would).
std::optional<core::JobImagePins> PinsOf(const AdmissionRequest& request,
                                         const core::Workload& workload, const core::Policy& policy,
                                         const AdmitOptions& options) {
  if (!options.image_pins || workload.kind != core::WorkloadKind::Pod ||
      request.operation != "CREATE") {
    return std::nullopt;
  }
  try {
    return options.image_pins(request.object, request.namespace_, policy.image_pin);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception&) {
    return std::nullopt;  // the lookup says why in its own log (manager/cache.h)
  }
}

// Where the pods of a job (or a Pod's job) being created are asked to go, when the webhook knows
// the cluster: a lookup that fails asks for nothing (the object is admitted as the rules alone
// would).
std::optional<core::PlacementRequest> PlacementOf(const AdmissionRequest& request,
                                                  const core::Workload& workload,
                                                  const core::Policy& policy,
                                                  const AdmitOptions& options) {
  if (!options.placement || request.operation != "CREATE") return std::nullopt;
  if (workload.kind != core::WorkloadKind::Pod && !core::KindInfoOf(workload.kind).job) {
    return std::nullopt;
  }
  try {
    return options.placement(request.object, workload, request.namespace_, policy.placement);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception&) {
    return std::nullopt;  // the lookup says why in its own log (manager/cache.h)
  }
}

// The containers of a job's pod that the job has no recorded digest for (its first pods), their
// tags resolved through the registry where the webhook is told to (AdmitOptions::resolve_digest):
// each digest found is pinned like a recorded one; each one not found is a warning, and the pod
// runs by tag until the job's first pods record what they run.
void ResolveUnrecorded(const AdmissionRequest& request, const AdmitOptions& options,
                       core::JobImagePins& pins, std::vector<std::string>& warnings) {
  if (!options.resolve_digest || pins.mode != core::PinMode::Pin) return;
  const auto spec = request.object.find("spec");
  if (spec == request.object.end() || !spec->is_object()) return;
  const auto containers = spec->find("containers");
  if (containers == spec->end() || !containers->is_array()) return;
  std::size_t asked = 0;
  for (const core::Json& container : *containers) {
    if (!container.is_object()) continue;
    const std::string name = container.value("name", "");
    const auto image_at = container.find("image");
    if (name.empty() || image_at == container.end() || !image_at->is_string()) continue;
    const std::string& image = image_at->get_ref<const std::string&>();
    const auto ref = core::TryParseImageReference(image);
    if (!ref || !ref->digest.empty() || ref->tag.empty() || pins.Find(name, image) != nullptr) {
      continue;
    }
    if (asked == options.max_resolved_containers) {
      warnings.push_back(FitWarning("ncclguard image-pin: ", image,
                                    " and the pod's other containers not resolved at admission: "
                                    "at most " +
                                        std::to_string(asked) + " a pod"));
      break;
    }
    ++asked;
    std::string why;
    const std::optional<std::string> digest =
        options.resolve_digest(*ref, request.object, request.namespace_, why);
    if (digest && core::IsSha256Digest(*digest)) {
      pins.pins.push_back({name, image, *digest, ""});
      continue;
    }
    warnings.push_back(FitWarning("ncclguard image-pin: " + image + " not resolved at admission (",
                                  why.empty() ? std::string("no digest") : why,
                                  "); it runs by tag until the job's first pods record a digest"));
  }
}

// The workload is parsed once here and handed to the rules.
AdmissionOutcome Decide(Endpoint endpoint, AdmissionRequest& request, const core::Policy& policy,
                        const AdmitOptions& options, const core::ObjectRef& ref, bool audit) {
  AdmissionOutcome skipped;
  skipped.response.uid = request.uid;
  skipped.result = AdmitResult::Skipped;
  if (request.operation != "CREATE" && request.operation != "UPDATE") return skipped;
  if (!request.sub_resource.empty() || IsExempt(request, options)) return skipped;
  try {
    std::optional<core::Workload> workload = core::ParseWorkload(request.object, options.runtimes);
    if (!workload) return skipped;
    std::optional<core::JobImagePins> pins = PinsOf(request, *workload, policy, options);
    std::vector<std::string> pin_warnings;
    // Only the mutating webhook in enforce mode asks the registry: the validating one sees what
    // it pinned, and audit mode changes nothing.
    if (pins && endpoint == Endpoint::Mutate && !audit) {
      ResolveUnrecorded(request, options, *pins, pin_warnings);
    }
    const std::optional<core::PlacementRequest> placement =
        PlacementOf(request, *workload, policy, options);
    const Known known{pins ? &*pins : nullptr, placement ? &*placement : nullptr};
    if (endpoint == Endpoint::Validate) {
      return Validate(request, *workload, policy, ref, audit, known);
    }
    if (audit) return AuditMutate(request, *workload, policy, known);
    AdmissionOutcome outcome =
        Mutate(request, *workload, policy, options.gate, options.runtimes, known);
    for (std::string& warning : pin_warnings) {
      outcome.response.warnings.push_back(std::move(warning));
    }
    return outcome;
  } catch (const core::InputError& e) {
    return Refuse(request, AdmitResult::Denied, 400, "BadRequest",
                  "ncclguard cannot read " + ref.Describe() + ": " + e.what());
  } catch (const memory::BudgetExceeded& e) {
    if (e.Pool()) throw;  // the replica is busy, not this object too large: the server says 503
    return Refuse(request, AdmitResult::Denied, 413, "RequestEntityTooLarge",
                  "ncclguard cannot check " + ref.Describe() + ": " + e.what() +
                      "; the request is denied so nothing unchecked runs");
  } catch (const std::bad_alloc&) {
    throw;  // out of memory: the server answers 503 and the review fails alone
  } catch (const std::exception& e) {
    return Refuse(request, AdmitResult::Error, 500, "InternalError",
                  "ncclguard internal error while checking " + ref.Describe() + ": " + e.what() +
                      "; the request is denied so nothing unchecked runs");
  }
}

// Audit mode never blocks: a request enforce mode refuses without judging it (unreadable, too
// large, a rule that failed) is admitted with a warning saying so. The message stays for the log;
// an internal error is still counted as one.
AdmissionOutcome AdmitRefused(AdmissionOutcome outcome) {
  outcome.response.allowed = true;
  outcome.response.status_code = 0;
  outcome.response.status_reason.clear();
  outcome.response.warnings = {
      FitWarning("ncclguard audit: would deny: ", outcome.response.message, "")};
  if (outcome.result == AdmitResult::Denied) outcome.result = AdmitResult::Audited;
  outcome.audit = true;
  return outcome;
}

}  // namespace

std::string_view EndpointName(Endpoint endpoint) {
  return endpoint == Endpoint::Mutate ? "mutate" : "validate";
}

std::string_view GateDecisionName(GateDecision decision) {
  switch (decision) {
    case GateDecision::Held:
      return "held";
    case GateDecision::Admitted:
      return "admitted";
    case GateDecision::None:
      break;
  }
  return "";
}

std::string_view AdmitResultName(AdmitResult result) {
  switch (result) {
    case AdmitResult::Skipped:
      return "skipped";
    case AdmitResult::Allowed:
      return "allowed";
    case AdmitResult::Patched:
      return "patched";
    case AdmitResult::Warned:
      return "warned";
    case AdmitResult::Denied:
      return "denied";
    case AdmitResult::Error:
      return "error";
    case AdmitResult::Audited:
      return "audited";
  }
  return "error";
}

std::string DenialMessage(const core::ObjectRef& object, const std::vector<core::Finding>& denies) {
  // Replica templates often share a container: one line per distinct problem, with where.
  struct Problem {
    const core::Finding* first;
    std::vector<std::string> paths;
  };
  std::vector<Problem> problems;
  for (const auto& finding : denies) {
    auto same = std::find_if(problems.begin(), problems.end(), [&](const Problem& problem) {
      return problem.first->rule == finding.rule && problem.first->message == finding.message;
    });
    if (same == problems.end()) {
      problems.push_back({&finding, {finding.path}});
    } else {
      same->paths.push_back(finding.path);
    }
  }
  std::string message = "ncclguard denied " + object.Describe() + ": " +
                        std::to_string(problems.size()) +
                        (problems.size() == 1 ? " problem" : " problems");
  for (const auto& problem : problems) {
    const core::Finding& finding = *problem.first;
    message += "\n- [" + finding.rule + "] " + finding.message;
    if (const core::Rule* rule = core::RuleRegistry::Find(finding.rule)) {
      message += " Fix: " + std::string(rule->Info().remedy);
    }
    message += " See " + finding.guide;
    if (!problem.paths.front().empty()) {
      message += " (at " + problem.paths.front();
      if (problem.paths.size() > 1) {
        message += " and " + std::to_string(problem.paths.size() - 1) + " more";
      }
      message += ")";
    }
  }
  return message;
}

std::string WarningText(const core::Finding& finding) {
  return FitWarning("ncclguard " + finding.rule + ": ", finding.message,
                    " (" + finding.guide + ")");
}

std::string AuditWarningText(const core::Finding& finding) {
  return FitWarning("ncclguard audit: would " + std::string(core::LevelName(finding.level)) +
                        ": [" + finding.rule + "] ",
                    finding.message, " (" + finding.guide + ")");
}

std::vector<std::string> AuditWarnings(const std::vector<core::Finding>& findings) {
  // Replica templates often share a container: one line per distinct problem.
  std::set<std::tuple<std::string_view, core::Level, std::string_view>> seen;
  std::vector<std::string> warnings;
  std::size_t more = 0;
  for (const core::Finding& finding : findings) {
    if (!seen.emplace(finding.rule, finding.level, finding.message).second) continue;
    if (seen.size() > kMaxAuditProblems) {
      ++more;
    } else {
      warnings.push_back(AuditWarningText(finding));
    }
  }
  if (more > 0) {
    warnings.push_back("ncclguard audit: and " + std::to_string(more) +
                       (more == 1 ? " more problem" : " more problems") +
                       "; `ncclguard lint` on the manifest lists every one");
  }
  return warnings;
}

AdmissionOutcome Admit(Endpoint endpoint, AdmissionRequest request, const core::Policy& policy,
                       const AdmitOptions& options, std::optional<core::Mode> mode) {
  const core::ObjectRef ref = RefOf(request);  // before the object is moved into the rules
  const bool audit = mode.value_or(policy.mode) == core::Mode::Audit;
  AdmissionOutcome outcome = Decide(endpoint, request, policy, options, ref, audit);
  if (audit && !outcome.response.allowed) outcome = AdmitRefused(std::move(outcome));
  outcome.object = ref;
  return outcome;
}

}  // namespace ncclguard::webhook
