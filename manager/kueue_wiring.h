// The preflight AdmissionCheck for Kueue (controllers/kueue_check.h) wired into the manager:
// informers on Kueue's Workloads, AdmissionChecks and ResourceFlavors (kueue.x-k8s.io/v1beta2),
// started on every replica; two controllers that run while leading. Added by
// `ncclguard controller --kueue-admission-check` (the chart's kueue.admissionCheck.enabled).
#pragma once

#include "manager/manager.h"

namespace ncclguard::manager {

// Before manager.Run. Until Kueue's CRDs are installed the informers report their resources
// not served and the controllers wait for them without holding the others up.
void AddKueueAdmissionCheck(Manager& manager, int workers);

}  // namespace ncclguard::manager
