// The background audit (docs/operator.md "Background audit and PolicyReports"): while leading,
// the controller evaluates the workloads in its caches (every kind of core::ManagedKinds() and
// GPU pods) in the namespaces the policy audits, on start, when one changes (its namespace is
// queued), every spec.audit.intervalSeconds and when the policy changes, and keeps one set of
// PolicyReports per namespace (core::PolicyReportsFor) with server-side apply. A report is written
// only when its content differs from what the API server holds (or this process last applied);
// a namespace's reports beyond the count now needed are deleted. Until wgpolicyk8s.io/v1alpha2
// policyreports are served (the chart does not install the CRD), it says so once and writes
// nothing. Turned off by `ncclguard controller --policy-reports=false`.
//
// The pure parts are here for tests; the controller module registers itself from the .cpp.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/audit.h"
#include "core/json.h"
#include "kube/informer.h"
#include "kube/resource.h"

namespace ncclguard::manager {

// wgpolicyk8s.io/v1alpha2 policyreports.
kube::ResourceRef PolicyReportResource();

// The index of the caches the audit reads by: a job's namespace, and a pod's when it is one the
// audit reads (manager/projections.h IsAuditedPod).
inline constexpr const char* kAuditNamespaceIndex = "audit-namespace";

// A digest of what ncclguard writes of a report (apiVersion, kind, name, namespace, labels,
// summary, results): equal for the report PolicyReportsFor builds and the object the API server
// stores of it (uid, resourceVersion, managedFields and timestamps left out).
std::string ReportDigest(const core::Json& report);
// What the audit's informer keeps of a report: its identity and {"digest": ReportDigest}.
kube::Projection ReportDigestProjection();

// The writes that bring a namespace's reports to `desired`.
struct ReportWrites {
  std::vector<core::Json> apply;    // whole reports, for server-side apply
  std::vector<std::string> remove;  // names of reports to delete
};

// `desired`: PolicyReportsFor's reports of the namespace, or none when it is not audited.
// `existing`: the namespace's reports the API server holds (label managed-by=ncclguard), name to
// ReportDigest. `last_applied`: what this process applied since, name to digest. A report is
// applied when its digest differs from the last applied one, or from the existing one when this
// process applied none; existing ones `desired` does not name are deleted. A namespace with
// nothing audited and no report gets nothing.
ReportWrites PlanReportWrites(const std::vector<core::Json>& desired,
                              const std::map<std::string, std::string>& existing,
                              const std::map<std::string, std::string>& last_applied);

// The counts the audit's gauges report, of one namespace or summed over all.
struct AuditTally {
  std::map<std::string, double> results;   // by PolicyReport result: pass, warn, fail
  std::map<std::string, double> findings;  // by rule id

  void Add(const std::vector<core::ObjectAudit>& audits);
  void Add(const AuditTally& other);
};

// Whether a change of an object the audit reads can change its results: its spec, labels,
// annotations or owners (status changes, the most frequent, cannot). Null: added or deleted.
bool AuditedFieldsChanged(const core::Json* old_object, const core::Json* new_object);

}  // namespace ncclguard::manager
