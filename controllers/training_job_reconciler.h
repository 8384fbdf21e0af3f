#pragma once

#include <string>
#include <vector>

#include "controllers/actions.h"
#include "controllers/cluster_view.h"
#include "controllers/job_kind.h"
#include "controllers/timestamps.h"
#include "core/json.h"

namespace ncclguard::controllers {

// The training-job controller (PyTorchJob, MPIJob, JobSet, and batch Jobs labelled
// ncclguard.io/managed=true, in namespaces labelled ncclguard.io/enabled=true):
//   - the headless rendezvous Service,
//   - the admission gate (ncclguard.io/gate=pending -> released once enough validated nodes),
//   - failure diagnosis (NcclDiagnosis condition and Events).
// Level-triggered: it reads the whole state from `view` and returns what to change; once those
// changes are reflected in the view, reconciling again returns no actions. Never throws for bad
// input: a spec the rules cannot read is reported on the job.
ReconcileResult ReconcileTrainingJob(const JobKey& key, const ClusterView& view, Timestamp now);

// Whether the gate is holding this job (the webhook set ncclguard.io/gate=pending). A change to
// nodes or NodeValidations requeues every such job.
bool GatePending(const core::Json& job);

// The diagnosis ids the job's NcclDiagnosis=True condition names: the highest ranked first, then
// those of its "(also: ...)" list; only ids this build registers. Empty without that condition.
std::vector<std::string> DiagnosesNamed(const core::Json& job);

// The managed jobs a pod (or a Service, or an Event's subject pod) belongs to, from the labels
// each kind's operator sets; a JobSet's pods also map to their child Job, which is harmless.
std::vector<JobKey> JobKeysForPod(const core::Json& pod);

}  // namespace ncclguard::controllers
