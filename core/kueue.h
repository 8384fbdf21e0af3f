// Kueue's names that ncclguard reads or writes (sigs.k8s.io/kueue, storage version v1beta2):
// the queue label that hands a job to Kueue, and the Workload/AdmissionCheck fields the
// preflight AdmissionCheck controller (controllers/kueue_check.h) answers.
#pragma once

#include <string_view>

#include "core/json.h"

namespace ncclguard::core {

inline constexpr std::string_view kKueueGroup = "kueue.x-k8s.io";
inline constexpr std::string_view kKueueApiVersion = "kueue.x-k8s.io/v1beta2";
// The topology-aware scheduling objects `ncclguard audit` reads (core/topology_audit.h), both
// cluster-scoped: ResourceFlavor (spec.nodeLabels, spec.topologyName) and Topology
// (spec.levels[].nodeLabel).
inline constexpr std::string_view kKueueResourceFlavors = "resourceflavors";
inline constexpr std::string_view kKueueTopologies = "topologies";
// On a job: Kueue queues it (its webhook suspends it, Kueue resumes it on admission).
inline constexpr std::string_view kKueueQueueNameLabel = "kueue.x-k8s.io/queue-name";
// On a pod Kueue's pod integration manages: the label, and the scheduling gate it lifts on
// admission.
inline constexpr std::string_view kKueueManagedLabel = "kueue.x-k8s.io/managed";
inline constexpr std::string_view kKueueAdmissionGate = "kueue.x-k8s.io/admission";
// Workload conditions (status.conditions) and AdmissionCheck states (status.admissionChecks).
inline constexpr std::string_view kKueueQuotaReserved = "QuotaReserved";
inline constexpr std::string_view kKueueAdmitted = "Admitted";
inline constexpr std::string_view kKueueFinished = "Finished";
inline constexpr std::string_view kKueueEvicted = "Evicted";
inline constexpr std::string_view kCheckPending = "Pending";
inline constexpr std::string_view kCheckReady = "Ready";
inline constexpr std::string_view kCheckRetry = "Retry";
// AdmissionCheck condition.
inline constexpr std::string_view kKueueActive = "Active";

// Whether `job` carries a non-empty kueue.x-k8s.io/queue-name label.
bool QueuedByKueue(const Json& job);

}  // namespace ncclguard::core
