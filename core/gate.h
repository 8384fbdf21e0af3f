// The admission gate contract (RULES.md): which jobs ncclguard holds, and how a held job is
// marked. The webhook marks on CREATE; the controller releases.
#pragma once

#include <string_view>

#include "core/json.h"
#include "core/workload.h"

namespace ncclguard::core {

inline constexpr std::string_view kEnabledNamespaceLabel = "ncclguard.io/enabled";
inline constexpr std::string_view kManagedJobLabel = "ncclguard.io/managed";
inline constexpr std::string_view kGateAnnotation = "ncclguard.io/gate";
inline constexpr std::string_view kGatePending = "pending";
inline constexpr std::string_view kGateAdmitted = "admitted";

// PyTorchJob, MPIJob and JobSet always; a batch Job only with ncclguard.io/managed=true.
// Pods are never managed jobs.
bool IsManagedJob(const Json& object, WorkloadKind kind);

// Where the kind keeps its suspend flag: /spec/suspend or /spec/runPolicy/suspend.
JsonPointer SuspendPointer(WorkloadKind kind);

// RFC 6902 operations that suspend `job` and annotate it ncclguard.io/gate=pending. Parent
// objects that do not exist yet are added whole; an existing suspend value is replaced (the gate
// decides when the job starts). Throws InputError when metadata/spec are not objects.
Json GateMarkPatch(const Json& job, WorkloadKind kind);

}  // namespace ncclguard::core
