// What ncclguard answers to one admission request: the rules of core/ applied the way DESIGN.md
// says (mutate the Pod, validate the job, mark managed jobs for the gate). Pure: no I/O, so
// every decision is unit-tested without a server.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/finding.h"
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
};

// How a request ended, for logs and metrics.
enum class AdmitResult { Skipped, Allowed, Patched, Warned, Denied, Error };

std::string_view AdmitResultName(AdmitResult result);

struct AdmissionOutcome {
  AdmissionResponse response;
  AdmitResult result = AdmitResult::Allowed;
  std::vector<core::Finding> findings;  // those that shaped the answer
  core::ObjectRef object;               // the object as messages and logs name it
};

// Answers `request`. Never throws: a rule that throws denies this request (fail closed) with
// an internal-error message and AdmitResult::Error. Takes the request by value so a server
// done with it moves the object in instead of copying it.
AdmissionOutcome Admit(Endpoint endpoint, AdmissionRequest request, const core::Policy& policy,
                       const AdmitOptions& options);

// The kubectl-facing texts, exposed for tests.
std::string DenialMessage(const core::ObjectRef& object, const std::vector<core::Finding>& denies);
std::string WarningText(const core::Finding& finding);

}  // namespace ncclguard::webhook
