// What ncclguard answers to one admission request: the rules of core/ applied the way DESIGN.md
// says (mutate the Pod, validate the job, mark managed jobs for the gate). Pure: no I/O, so
// every decision is unit-tested without a server.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/finding.h"
#include "core/gate.h"
#include "core/image_pin.h"
#include "core/image_ref.h"
#include "core/placement_request.h"
#include "core/policy.h"
#include "core/trainjob.h"
#include "webhook/admission_review.h"

namespace ncclguard::webhook {

enum class Endpoint { Mutate, Validate };

std::string_view EndpointName(Endpoint endpoint);

struct AdmitOptions {
  // Never intercepted besides kube-system: the namespace ncclguard itself runs in.
  std::vector<std::string> exempt_namespaces{};
  // Where a TrainJob's runtime is found (the controller's caches, for the in-process webhook);
  // none: a TrainJob is judged by itself.
  core::RuntimeLookup runtimes{};
  // The gate's fast path (core/gate.h): a managed job the gate would release now is admitted
  // unsuspended, ncclguard.io/gate=admitted. None: every managed job is held for the controller.
  core::GateLookup gate{};
  // The image digests recorded for a Pod's job (core/image_pin.h; the controller's caches, for
  // the in-process webhook): rule image-pin pins the pod's containers to them. None: nothing is
  // pinned.
  core::ImagePinLookup image_pins{};
  // Where a managed job's pods are asked to go (core/placement_request.h; the controller's caches,
  // for the in-process webhook): rule topology-placement adds Kueue's topology request to a
  // queued job's pod templates or a pod affinity to a job's pods. None: nothing is asked for.
  core::PlacementLookup placement{};
  // Where a tag is resolved to the digest its registry serves now, for a job's pod whose container
  // has no recorded digest yet (the job's first pods; webhook/digest_resolver.h, off by default):
  // the digest, or nullopt with `why` said. Asked only by the mutating webhook in enforce mode,
  // for at most max_resolved_containers containers a pod, one after the other.
  std::function<std::optional<std::string>(const core::ImageReference& image, const core::Json& pod,
                                           std::string_view namespace_, std::string& why)>
      resolve_digest{};
  std::size_t max_resolved_containers = 2;
};

// How a request ended, for logs and metrics. Audited: answered in audit mode, admitted unchanged
// although enforce mode would have changed or denied it, or warned about it.
// What the gate made of a managed job's CREATE: held (suspended, ncclguard.io/gate=pending, for
// the controller to release), or admitted at once (its validated nodes exist).
enum class GateDecision { None, Held, Admitted };
std::string_view GateDecisionName(GateDecision decision);  // "", "held", "admitted"

enum class AdmitResult { Skipped, Allowed, Patched, Warned, Denied, Error, Audited };

std::string_view AdmitResultName(AdmitResult result);

struct AdmissionOutcome {
  AdmissionResponse response;
  AdmitResult result = AdmitResult::Allowed;
  std::vector<core::Finding> findings;  // those that shaped the answer
  core::ObjectRef object;               // the object as messages and logs name it
  // Audit mode's validation: `findings` are what enforce mode would have acted on, said in the
  // warnings (AuditWarnings) and counted as audit findings, not as findings.
  bool audit = false;
  GateDecision gate = GateDecision::None;
};

// Answers `request` in `mode`, the mode its path names (kube-apiserver routes a namespace
// labelled ncclguard.io/mode to /mutate/enforce, /validate/enforce or /validate/audit), else the
// policy's. Never throws. Enforce: a rule that throws denies this request (fail closed) with an
// internal-error message and AdmitResult::Error. Audit: nothing is changed or denied; what enforce
// would have done is said in warnings (an object that cannot be read or checked is admitted with
// a warning saying so). Takes the request by value so a server done with it moves the object in
// instead of copying it.
AdmissionOutcome Admit(Endpoint endpoint, AdmissionRequest request, const core::Policy& policy,
                       const AdmitOptions& options, std::optional<core::Mode> mode = std::nullopt);

// The kubectl-facing texts, exposed for tests.
std::string DenialMessage(const core::ObjectRef& object, const std::vector<core::Finding>& denies);
std::string WarningText(const core::Finding& finding);

// Audit mode's warnings: at most this many distinct problems (rule and message), then one line
// saying how many more there are.
inline constexpr std::size_t kMaxAuditProblems = 10;
// "ncclguard audit: would deny: [rule] message (guide link)"; "would fix", "would warn".
std::string AuditWarningText(const core::Finding& finding);
// One warning per distinct problem of `findings`, in their order, bounded as said above.
std::vector<std::string> AuditWarnings(const std::vector<core::Finding>& findings);

}  // namespace ncclguard::webhook
