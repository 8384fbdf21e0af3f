// The admission gate (docs/contract.md, "The gate"): which jobs ncclguard holds, and how a held
// job is marked (the names are in core/contract.h). The webhook marks on CREATE; the controller
// releases.
#pragma once

#include <functional>
#include <optional>
#include <string_view>

#include "core/contract.h"
#include "core/json.h"
#include "core/policy.h"
#include "core/trainjob.h"
#include "core/workload.h"

namespace ncclguard::core {

// Whether ncclguard manages (gates, serves, diagnoses) `object` of `kind`: every job kind, unless
// its KindInfo::opt_in_label is set, in which case only objects labelled with it "true" (a batch
// Job: ncclguard.io/managed=true). Pods are never managed jobs. The webhook, the controller and
// the manager all ask this; the namespace opt-in is theirs to check. Lenient: labels of the wrong
// type read as absent (the API server never stores them). A job whose controller is a job of
// another kind (the JobSet a TrainJob made) is managed through its owner, not by itself.
bool IsManagedJob(const Json& object, WorkloadKind kind);

// Whether a controller ownerReference of `object` names a job kind.
bool ControlledByManagedJob(const Json& object);

// Where a job kind keeps its suspend flag: /spec/suspend or /spec/runPolicy/suspend.
JsonPointer SuspendPointer(WorkloadKind kind);

// RFC 6902 operations that suspend `job` and annotate it ncclguard.io/gate=pending. Parent
// objects that do not exist yet are added whole; an existing suspend value is replaced (the gate
// decides when the job starts). Throws InputError when metadata/spec are not objects.
// A kind that cannot be suspended (PodGated) gets only the annotation: its pods are held.
Json GateMarkPatch(const Json& job, WorkloadKind kind);

// The gate's fast path: whether the gate would release `job` at once, answered from the
// controller's count of validated nodes (manager::WebhookSource, for the in-process webhook).
// When it would, the webhook admits the job unsuspended, marked with GateAdmitPatch: a job on a
// healthy cluster starts without the round trip through the controller. `runtimes` finds a
// TrainJob's runtime.
using GateLookup =
    std::function<bool(const Json& job, const Policy& policy, const RuntimeLookup& runtimes)>;

// RFC 6902 operations that annotate `job` ncclguard.io/gate=admitted, its suspend field left as
// the submitter wrote it. Throws InputError when metadata is not an object.
Json GateAdmitPatch(const Json& job);

// The pod-level gate, for job kinds without a suspend field (KindInfo::PodGated): the webhook
// adds the scheduling gate kSchedulingGate to their pods on CREATE (the pod stays
// SchedulingGated), the controller removes it from all of the job's pods once the job's gate
// admits it, as it would unsuspend a job.
//
// Whether the pod's spec.schedulingGates names `name`.
bool HasSchedulingGate(const Json& pod, std::string_view name);
// The pod-gated job kind whose pod label the pod carries, or nullopt.
std::optional<WorkloadKind> PodGatedJobOf(const Json& pod);
// Whether Kueue holds the pod itself: its queue-name or managed label, or its admission gate.
bool ManagedByKueue(const Json& pod);
// RFC 6902 operations that add kSchedulingGate to the pod. Throws InputError without a spec.
Json PodSchedulingGatePatch(const Json& pod);
// The pod's scheduling gates without `name` (what a patch that removes it writes).
Json SchedulingGatesWithout(const Json& pod, std::string_view name);

}  // namespace ncclguard::core
