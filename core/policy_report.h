// The PolicyReports (wgpolicyk8s.io/v1alpha2, the policy working group's API) the background
// audit writes: one per namespace, a result per object and rule. Pure: the controller applies
// what these build (manager/audit_controller.h), `ncclguard audit` prints the same results.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "core/audit.h"
#include "core/json.h"

namespace ncclguard::core {

inline constexpr std::string_view kPolicyReportApiVersion = "wgpolicyk8s.io/v1alpha2";
inline constexpr std::string_view kPolicyReportGroup = "wgpolicyk8s.io";
// Each result's source and policy.
inline constexpr std::string_view kPolicyReportSource = "ncclguard";
// The report of a namespace; a namespace whose results do not fit one has ncclguard-2, -3...
inline constexpr std::string_view kPolicyReportName = "ncclguard";
// The reports' label app.kubernetes.io/managed-by: how the controller finds its own.
inline constexpr std::string_view kPolicyReportManagedBy = "ncclguard";
// A report's JSON stays under this: etcd refuses requests over 1.5 MiB (its default
// --max-request-bytes), and the API server's own encoding adds to ours.
inline constexpr std::size_t kPolicyReportBudget = 1'000'000;

// One result: `finding` of `audit`, or (null) the pass of an object with no finding.
Json PolicyReportResult(const ObjectAudit& audit, const AuditFinding* finding);

// The reports of `namespace_`, results ordered by object (kind, name) and rule, split where one
// would pass `budget` bytes; an object's results are never split between two reports. The first
// is named kPolicyReportName, the next ones kPolicyReportName-2, -3... A namespace with nothing
// audited gets one empty report (so that its results are cleared).
std::vector<Json> PolicyReportsFor(std::string_view namespace_, std::vector<ObjectAudit> audits,
                                   std::size_t budget = kPolicyReportBudget);

// The name of the `index`th report (0-based) of a namespace.
std::string PolicyReportName(std::size_t index);

}  // namespace ncclguard::core
