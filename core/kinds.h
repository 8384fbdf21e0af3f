// The kinds ncclguard understands, in one table: which group/version/kind is a Pod or a training
// job, where its pod templates and their replica counts are, how it is suspended, which label its
// operator puts on its pods, and the shape of its status conditions. The workload model
// (core/workload.h), the gate (core/gate.h) and the controllers read this table.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "core/json.h"

namespace ncclguard::core {

enum class WorkloadKind { Pod, BatchJob, PyTorchJob, MpiJob, JobSet };

// Where a kind keeps its pod templates (KindInfo::templates points at them).
enum class TemplateLayout {
  PodSpec,         // Pod: the object's spec is the PodSpec; one pod
  JobTemplate,     // batch/v1 Job: a PodTemplateSpec; pods = parallelism (completions if Indexed)
  ReplicaSpecs,    // Kubeflow: a map role -> {replicas, template}
  ReplicatedJobs,  // JobSet: a list of {name, replicas, template: a batch/v1 JobTemplateSpec}
};

// How a kind's status.conditions entries look: the controller writes its conditions in the shape
// the kind's own schema (and operator) uses.
enum class ConditionStyle {
  None,      // Pod: ncclguard writes no pod conditions
  Kubeflow,  // kubeflow.org JobCondition: lastUpdateTime
  Batch,     // batch/v1 JobCondition: lastProbeTime
  Meta,      // metav1.Condition (JobSet), whose reason pattern core/reason.h satisfies
};

struct KindInfo {
  WorkloadKind kind;
  std::string_view api_version;  // the version ncclguard writes; any version of the group is read
  std::string_view kind_name;    // "PyTorchJob"
  std::string_view resource;     // REST plural
  TemplateLayout layout;
  std::string_view templates;      // JSON Pointer of the pod template(s)
  std::string_view ranks_per_pod;  // JSON Pointer of the declared processes per pod, or ""
  // Jobs are managed (gated, given a rendezvous Service, diagnosed); Pods are only fixed.
  bool job;
  // The label the kind's operator puts on the job's pods, valued with the job's name.
  std::string_view pod_job_label;
  std::string_view suspend_field;  // JSON Pointer of the suspend flag ("" for Pod)
  ConditionStyle condition_style;
  // Whether ncclguard makes the rendezvous Service. The mpi-operator makes its own headless
  // Service named after the MPIJob (and sets its pods' subdomain to it) and resets the selector of
  // any Service of that name it controls, so a second writer would fight it.
  bool ncclguard_makes_service;
};

const KindInfo& KindInfoOf(WorkloadKind kind);
// The job kinds (every kind but Pod), in the table's order.
std::span<const KindInfo> ManagedKinds();
// The kind of an apiVersion and kind: a Pod only in "v1", the others in any version of their group.
std::optional<WorkloadKind> KindOf(std::string_view api_version, std::string_view kind);
// The job kind of an object (its apiVersion and kind), or nullopt for a Pod or anything else.
std::optional<WorkloadKind> ManagedKindOf(const Json& object);

}  // namespace ncclguard::core
