// The preflight as a Kueue AdmissionCheck (docs/operator.md "With Kueue"): for AdmissionChecks
// whose spec.controllerName is ncclguard.io/preflight, their Active condition, and on every
// Workload with quota reserved that lists one, that check's entry of status.admissionChecks:
//   Ready    enough nodes of the assigned flavor's instance type pass validation (the gate's
//            count and message, controllers/gate.h), with podSetUpdates adding the nodeSelector
//            ncclguard.io/validated=true to the pod sets that need validated nodes;
//   Pending  while not, with the gate's message, kept up to date as nodes change;
//   Retry    once the policy's gate.holdTimeoutSeconds passed since quota was reserved, with
//            requeueAfterSeconds = gate.retryAfterSeconds (Kueue releases the quota and
//            requeues). Never Rejected: nodes under repair heal.
// In a namespace in audit mode (core::ModeIn) the entry turns Ready at once, without
// podSetUpdates, its message saying what enforce mode would have answered.
// Writes are server-side applies as kKueueFieldManager naming only that entry (or condition),
// so Kueue's own fields and entries are never overwritten. Pure and level-triggered.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "controllers/actions.h"
#include "controllers/cluster_view.h"
#include "controllers/timestamps.h"
#include "core/json.h"

namespace ncclguard::controllers {

// The field manager of the controller's applies to Kueue's objects.
inline constexpr std::string_view kKueueFieldManager = "ncclguard-preflight";

// A cluster-scoped AdmissionCheck, by name.
struct AdmissionCheckKey {
  std::string name;

  std::string ToString() const { return name; }
  static std::optional<AdmissionCheckKey> Parse(std::string_view text);
  bool operator==(const AdmissionCheckKey&) const = default;
};

// A Workload: "<namespace>/<name>".
struct WorkloadKey {
  std::string namespace_;
  std::string name;

  std::string ToString() const { return namespace_ + "/" + name; }
  static std::optional<WorkloadKey> Parse(std::string_view text);
  bool operator==(const WorkloadKey&) const = default;
};

// Whether the AdmissionCheck's spec.controllerName is ncclguard.io/preflight.
bool IsPreflightCheck(const core::Json& admission_check);

// The Active condition of one of our AdmissionChecks (none for others or once it is set).
ReconcileResult ReconcileAdmissionCheck(const std::optional<core::Json>& admission_check,
                                        Timestamp now);

// What the Workload reconcile reads besides the ClusterView.
struct KueueObjects {
  // Names of the AdmissionChecks whose controllerName is ours.
  std::vector<std::string> preflight_checks;
  // A ResourceFlavor by name (nullopt when absent).
  std::function<std::optional<core::Json>(std::string_view name)> flavor;
};

// Our entries of the Workload's status.admissionChecks. Never throws: a Workload whose pod sets
// cannot be read gets a Pending entry saying so.
ReconcileResult ReconcileWorkloadChecks(const std::optional<core::Json>& workload,
                                        const KueueObjects& kueue, const ClusterView& view,
                                        Timestamp now);

// Whether one of `checks` on the Workload is Pending (nodes changing may answer it).
bool HasPendingCheck(const core::Json& workload, const std::vector<std::string>& checks);

}  // namespace ncclguard::controllers
