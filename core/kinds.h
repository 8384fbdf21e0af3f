// The kinds ncclguard understands, in one table: which group/version/kind is a Pod or a training
// job, where its pod templates and their replica counts are, how it is suspended, which label its
// operator puts on its pods, how it names them, and the shape of its status conditions. The
// workload model (core/workload.h), the rules, the gate (core/gate.h), rendezvous naming
// (core/rendezvous.h) and the controllers read this table; none of them names a job kind.
// Adding a kind is one WorkloadKind value and one entry (docs/operator.md, "Adding a job kind").
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string_view>

#include "core/json.h"

namespace ncclguard::core {

enum class WorkloadKind {
  Pod,
  BatchJob,
  PyTorchJob,
  MpiJob,
  JobSet,
  HyperPodPyTorchJob,
  TrainJob,
  TrainingRuntime,
  ClusterTrainingRuntime,
};

// Where a kind keeps its pod templates (KindInfo::templates points at them).
enum class TemplateLayout {
  PodSpec,          // Pod: the object's spec is the PodSpec; one pod
  JobTemplate,      // batch/v1 Job: a PodTemplateSpec; pods = parallelism (completions if Indexed)
  ReplicaSpecs,     // Kubeflow: a map role -> {replicas, template}
  ReplicatedJobs,   // JobSet: a list of {name, replicas, template: a batch/v1 JobTemplateSpec}
  ReplicaSpecList,  // HyperPodPyTorchJob: a list of {name, replicas, template: a PodTemplateSpec}
  // TrainJob: no pod template of its own; its pods are its runtime's (a JobSet template), with
  // spec.trainer and spec.runtimePatches applied as Kubeflow Trainer does (core/trainjob.h).
  TrainerRuntime,
};

// How a kind's status.conditions entries look: the controller writes its conditions in the shape
// the kind's own schema (and operator) uses.
enum class ConditionStyle {
  None,      // Pod: ncclguard writes no pod conditions
  Kubeflow,  // kubeflow.org JobCondition: lastUpdateTime
  Batch,     // batch/v1 JobCondition: lastProbeTime
  Meta,      // metav1.Condition (JobSet), whose reason pattern core/reason.h satisfies
};

// A few replica roles (template names) by name; unused slots are empty.
using Roles = std::array<std::string_view, 2>;

// How the kind's operator names the pod that hosts rank 0: <job name>[-<role>]<index>.
struct RankZeroPod {
  // Replica types (keys under KindInfo::templates) that may host rank 0, best first: the first
  // the job declares names the pod, else the last one; lower-cased, as Kubeflow's operators do.
  Roles roles{};
  // Or a JSON Pointer to the role's name in the job, used as written; no hostname without it.
  std::string_view role_at{};
  std::string_view index{};  // "-0" (pod index), "-0-0" (job index, pod index)
};

struct KindInfo {
  WorkloadKind kind{};
  std::string_view api_version{};  // the version ncclguard writes; any version of the group is read
  std::string_view kind_name{};    // "PyTorchJob"
  std::string_view resource{};     // REST plural
  bool cluster_scoped = false;     // ClusterTrainingRuntime; every other kind is namespaced
  TemplateLayout layout{};
  std::string_view templates{};      // JSON Pointer of the pod template(s)
  std::string_view ranks_per_pod{};  // JSON Pointer of the declared processes per pod, or ""
  // Replica roles whose pods run no ranks (an MPIJob's launcher): not counted in the world size.
  Roles rankless_roles{};
  // The container the kind's operator runs training in by convention, for templates without a
  // GPU container ("" when the kind has none).
  std::string_view training_container{};
  // Jobs are managed (gated, given a rendezvous Service, diagnosed); Pods are only fixed, and
  // Kubeflow Trainer's runtimes (templates of many TrainJobs' pods) only checked.
  bool job = false;
  // When set, a job is managed only when it carries this label valued "true" (opt-in per object:
  // a batch Job is often not a training job).
  std::string_view opt_in_label{};
  // JSON Pointer of the suspend flag. "" for Pod, and for a job kind that cannot be suspended:
  // the gate holds such a job's pods instead, with a scheduling gate (PodGated).
  std::string_view suspend_field{};
  ConditionStyle condition_style = ConditionStyle::None;
  // The label the kind's operator puts on the job's pods, valued with the job's name.
  std::string_view pod_job_label{};
  // Kinds that share a pod_job_label are told apart by the kind of the pod's owner; a pod that no
  // owner ties to one of them belongs to the one marked here (exactly one per shared label).
  bool pod_label_fallback = false;
  RankZeroPod rank_zero{};
  // JSON Pointer of a field that names the job's rendezvous Service (and its pods' subdomain)
  // instead of the job's name, or "".
  std::string_view service_name_field{};
  // Whether ncclguard makes the rendezvous Service. The mpi-operator makes its own headless
  // Service named after the MPIJob (and sets its pods' subdomain to it) and resets the selector of
  // any Service of that name it controls, so a second writer would fight it.
  bool ncclguard_makes_service = false;
  // Whether the mutating webhook gives pods that carry pod_job_label a missing subdomain (the
  // rendezvous Service) and hostname: Kubeflow's training operator sets neither; the mpi-operator
  // and JobSet set both; a batch Job's pods get theirs from its template.
  bool ncclguard_sets_pod_subdomain = false;
};

const KindInfo& KindInfoOf(WorkloadKind kind);
// The job kinds, in the table's order.
std::span<const KindInfo> ManagedKinds();
// The kinds that are templates of other kinds' pods (Kubeflow Trainer's TrainingRuntime and
// ClusterTrainingRuntime): checked, never fixed or gated by the webhook.
std::span<const KindInfo> TemplateKinds();
// The kind of an apiVersion and kind: a Pod only in "v1", the others in any version of their group.
std::optional<WorkloadKind> KindOf(std::string_view api_version, std::string_view kind);
// The job kind of an object (its apiVersion and kind), or nullopt for a Pod or anything else.
std::optional<WorkloadKind> ManagedKindOf(const Json& object);

// Whether the gate holds a job of this kind by its pods' scheduling gate (core/contract.h
// kSchedulingGate), the kind having no suspend field.
bool PodGated(const KindInfo& info);

// Whether pods of `role` run ranks (false for the kind's rankless_roles).
bool RunsRanks(const KindInfo& info, std::string_view role);

}  // namespace ncclguard::core
