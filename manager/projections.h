// What the controller keeps of each watched object: only the fields the reconcilers read, so
// that a cache of 10,000 pods stays small. The informer adds the identity fields to each. Those
// that only keep some fields are kube::KeepFields lists; pods, jobs and Events need code (label
// filters, only the failing container states, only relevant Events).
#pragma once

#include "controllers/job_kind.h"
#include "core/json.h"
#include "kube/informer.h"

namespace ncclguard::manager {

// A managed job: metadata the reconciler reads, the whole spec (the rules parse it) and the
// status conditions; apiVersion and kind are filled in (list items of built-in kinds lack them).
kube::Projection JobProjection(core::WorkloadKind kind);
// A pod: the job labels, owner kinds, node, container states and PodScheduled=False conditions.
// A pod of no managed kind keeps its identity only.
kube::Projection PodProjection();
// What the background audit reads of a pod (manager/audit_controller.h): for a pod with a GPU
// container, apiVersion and kind (list items lack them), its labels and what the rules read of
// its spec (each container's name, image, env, envFrom, resources, securityContext and
// volumeMounts; volumes' names, emptyDir and hostPath; nodeSelector, nodeAffinity, hostNetwork,
// hostname, subdomain), so that core::AuditObject finds on it what it finds on the whole pod;
// any other pod keeps its identity only.
kube::Projection AuditPodProjection();
// Whether `pod` as AuditPodProjection keeps it is one the audit reads (it has a GPU container).
bool IsAuditedPod(const core::Json& pod);
kube::Projection ServiceProjection();
kube::Projection NodeProjection();
// What the learned instance-type catalog reads of a Node: the device plugins' capacity counts
// (controllers/observed_catalog.h).
kube::Projection ObservedNodeProjection();
kube::Projection NodeValidationProjection();
kube::Projection NamespaceProjection();
// events.k8s.io/v1 Events about pods and managed kinds: regarding, reason, note, type.
kube::Projection EventProjection();
// The Events the controller reads at all: a pod's FailedScheduling (the scheduling diagnoses) and
// ncclguard's own (a job's Events are not said twice). A busy cluster's other Events (Scheduled,
// SuccessfulCreate, Pulled, Started: two or more a pod) are not cached.
bool ReadEvent(const core::Json& event);

// Indexes (manager/cache.h names them): pods by "<ns>/<job label>=<job name>" for each managed
// kind's label; Events by "<ns>/<kind>/<name>" of what they are about.
kube::IndexFunction PodsByJob();
kube::IndexFunction EventsByRegarding();

}  // namespace ncclguard::manager
