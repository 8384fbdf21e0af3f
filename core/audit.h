// What the background audit, `ncclguard audit` and the webhook in audit mode say about an object
// that exists: every rule's finding as a PolicyReport result (pass, warn, fail), the fixes
// included, since in audit mode nothing fixes them. Pure.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "core/finding.h"
#include "core/json.h"
#include "core/object_ref.h"
#include "core/policy.h"
#include "core/trainjob.h"

namespace ncclguard::core {

// The values of a PolicyReport result ncclguard writes (wgpolicyk8s.io/v1alpha2).
enum class AuditResult { Pass, Warn, Fail };

std::string_view AuditResultName(AuditResult result);

struct AuditFinding {
  Finding finding;  // rule, the level the rule acts at (its action), guide link, message, path
  AuditResult result = AuditResult::Warn;
  // The PolicyReport severity: high for a denial, medium for a fix, low for a warning.
  std::string_view severity;
};

struct ObjectAudit {
  ObjectRef object;                    // apiVersion, kind, namespace, name, uid
  std::vector<AuditFinding> findings;  // empty: the object passes

  AuditResult Result() const;  // the worst of its findings; Pass when none
};

// The result a finding is reported as: a denial fails; a fix fails on a Pod (it runs without
// it) and warns on a job (its pods are fixed when created, in enforce mode); a warning warns.
AuditResult ResultOf(const Finding& finding, bool pod);

// Whether the audit reports on `object`: a job of a kind ncclguard models (a TrainJob, a JobSet,
// a PyTorchJob...) or a Pod, with a GPU container in a pod template, and not made by a job of
// such a kind (the JobSet of a TrainJob, the Jobs of a JobSet: their maker is reported).
// nullopt for anything else. Throws InputError where Evaluate does.
std::optional<ObjectAudit> AuditObject(const Json& object, const Policy& policy,
                                       const RuntimeLookup& runtimes = {});

}  // namespace ncclguard::core
