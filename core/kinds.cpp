#include "core/kinds.h"

#include <algorithm>
#include <array>

#include "core/contract.h"

namespace ncclguard::core {
namespace {

// Pod labels, as set by each kind's operator:
//   Kubeflow training-operator and mpi-operator: training.kubeflow.org/job-name
//   JobSet: jobset.sigs.k8s.io/jobset-name
//   batch/v1 Job controller (Kubernetes >= 1.27): batch.kubernetes.io/job-name
//   SageMaker HyperPod training operator: HPJob (the label the HyperPod CLI and SDK select the
//   job's pods by: aws/sagemaker-hyperpod-cli, hyperpod_pytorch_job.py list_pods)
//   Kubeflow Trainer: none of its own; its JobSet, named as the TrainJob, labels them
// Pod comes first, then the job kinds (ManagedKinds()), then the template kinds.
constexpr std::array<KindInfo, 9> kKinds{{
    {
        .kind = WorkloadKind::Pod,
        .api_version = "v1",
        .kind_name = "Pod",
        .resource = "pods",
        .layout = TemplateLayout::PodSpec,
        .templates = "/spec",
    },
    {
        .kind = WorkloadKind::PyTorchJob,
        .api_version = "kubeflow.org/v1",
        .kind_name = "PyTorchJob",
        .resource = "pytorchjobs",
        .layout = TemplateLayout::ReplicaSpecs,
        .templates = "/spec/pytorchReplicaSpecs",
        .ranks_per_pod = "/spec/nprocPerNode",
        .training_container = "pytorch",
        .job = true,
        .suspend_field = "/spec/runPolicy/suspend",
        .condition_style = ConditionStyle::Kubeflow,
        .pod_job_label = "training.kubeflow.org/job-name",
        .rank_zero = {.roles = {"Master", "Worker"}, .index = "-0"},
        .ncclguard_makes_service = true,
        .ncclguard_sets_pod_subdomain = true,
    },
    {
        .kind = WorkloadKind::MpiJob,
        .api_version = "kubeflow.org/v2beta1",
        .kind_name = "MPIJob",
        .resource = "mpijobs",
        .layout = TemplateLayout::ReplicaSpecs,
        .templates = "/spec/mpiReplicaSpecs",
        .ranks_per_pod = "/spec/slotsPerWorker",
        .rankless_roles = {"Launcher"},
        .job = true,
        .suspend_field = "/spec/runPolicy/suspend",
        .condition_style = ConditionStyle::Kubeflow,
        .pod_job_label = "training.kubeflow.org/job-name",
        // The launcher's owner is its batch Job, not the MPIJob.
        .pod_label_fallback = true,
        .rank_zero = {.roles = {"Worker"}, .index = "-0"},
    },
    {
        .kind = WorkloadKind::JobSet,
        .api_version = "jobset.x-k8s.io/v1alpha2",
        .kind_name = "JobSet",
        .resource = "jobsets",
        .layout = TemplateLayout::ReplicatedJobs,
        .templates = "/spec/replicatedJobs",
        .job = true,
        .suspend_field = "/spec/suspend",
        .condition_style = ConditionStyle::Meta,
        .pod_job_label = "jobset.sigs.k8s.io/jobset-name",
        .rank_zero = {.role_at = "/spec/replicatedJobs/0/name", .index = "-0-0"},
        .service_name_field = "/spec/network/subdomain",
        // The JobSet controller makes the headless Service (network.enableDNSHostnames, on by
        // default) and sets the pods' hostname and subdomain.
    },
    {
        .kind = WorkloadKind::BatchJob,
        .api_version = "batch/v1",
        .kind_name = "Job",
        .resource = "jobs",
        .layout = TemplateLayout::JobTemplate,
        .templates = "/spec/template",
        .job = true,
        .opt_in_label = kManagedJobLabel,
        .suspend_field = "/spec/suspend",
        .condition_style = ConditionStyle::Batch,
        .pod_job_label = "batch.kubernetes.io/job-name",
        .rank_zero = {.index = "-0"},  // an Indexed Job's pod hostname
        .ncclguard_makes_service = true,
    },
    {
        // SageMaker HyperPod's training operator (closed source; the schema of AWS's SDK models,
        // aws/sagemaker-hyperpod-cli). Its agent in each pod (hyperpodrun) gets the rank-0 address
        // and the rank table from the operator: no Service, no MASTER_ADDR, no rank-0 hostname.
        // The gate holds its pods, not the job: what the operator does with runPolicy.suspend
        // cannot be tested outside AWS (docs/operator.md, "On SageMaker HyperPod").
        .kind = WorkloadKind::HyperPodPyTorchJob,
        .api_version = "sagemaker.amazonaws.com/v1",
        .kind_name = "HyperPodPyTorchJob",
        .resource = "hyperpodpytorchjobs",
        .layout = TemplateLayout::ReplicaSpecList,
        .templates = "/spec/replicaSpecs",
        .ranks_per_pod = "/spec/nprocPerNode",
        .job = true,
        .condition_style = ConditionStyle::Meta,
        .pod_job_label = "HPJob",
    },
    {
        // Kubeflow Trainer v2: the Trainer makes one JobSet named as the TrainJob from its
        // runtime, whose replicatedJob "node" runs the training container "node"; torchrun's
        // PET_MASTER_ADDR is <name>-node-0-0.<name>, the JobSet's pod and Service names.
        .kind = WorkloadKind::TrainJob,
        .api_version = "trainer.kubeflow.org/v1alpha1",
        .kind_name = "TrainJob",
        .resource = "trainjobs",
        .layout = TemplateLayout::TrainerRuntime,
        .templates = "/spec/replicatedJobs",  // in the JobSet the Trainer makes (core/trainjob.h)
        .ranks_per_pod = "/spec/trainer/numProcPerNode",
        // The runtime's initializers (jobs of their own in the JobSet) fetch data, run no ranks.
        .rankless_roles = {"dataset-initializer", "model-initializer"},
        .training_container = "node",
        .job = true,
        .suspend_field = "/spec/suspend",
        .condition_style = ConditionStyle::Meta,
        .pod_job_label = "jobset.sigs.k8s.io/jobset-name",
        .rank_zero = {.roles = {"node"}, .index = "-0-0"},
    },
    {
        .kind = WorkloadKind::TrainingRuntime,
        .api_version = "trainer.kubeflow.org/v1alpha1",
        .kind_name = "TrainingRuntime",
        .resource = "trainingruntimes",
        .layout = TemplateLayout::ReplicatedJobs,
        .templates = "/spec/template/spec/replicatedJobs",
        .training_container = "node",
    },
    {
        .kind = WorkloadKind::ClusterTrainingRuntime,
        .api_version = "trainer.kubeflow.org/v1alpha1",
        .kind_name = "ClusterTrainingRuntime",
        .resource = "clustertrainingruntimes",
        .cluster_scoped = true,
        .layout = TemplateLayout::ReplicatedJobs,
        .templates = "/spec/template/spec/replicatedJobs",
        .training_container = "node",
    },
}};

// Where the job kinds end in kKinds.
constexpr std::size_t kEndOfJobKinds = 7;
static_assert(kKinds[kEndOfJobKinds - 1].job && !kKinds[kEndOfJobKinds].job,
              "the job kinds follow Pod, the template kinds follow them");

std::string_view Group(std::string_view api_version) {
  const auto slash = api_version.find('/');
  return slash == std::string_view::npos ? std::string_view{} : api_version.substr(0, slash);
}

}  // namespace

const KindInfo& KindInfoOf(WorkloadKind kind) {
  for (const KindInfo& info : kKinds) {
    if (info.kind == kind) return info;
  }
  return kKinds.front();
}

std::span<const KindInfo> ManagedKinds() {
  return std::span(kKinds).subspan(1, kEndOfJobKinds - 1);
}

std::span<const KindInfo> TemplateKinds() { return std::span(kKinds).subspan(kEndOfJobKinds); }

std::optional<WorkloadKind> KindOf(std::string_view api_version, std::string_view kind) {
  for (const KindInfo& info : kKinds) {
    if (info.kind_name != kind) continue;
    // The core group has no name: a Pod is "v1" exactly.
    const bool matches = Group(info.api_version).empty()
                             ? api_version == info.api_version
                             : Group(api_version) == Group(info.api_version);
    if (matches) return info.kind;
  }
  return std::nullopt;
}

std::optional<WorkloadKind> ManagedKindOf(const Json& object) {
  if (!object.is_object()) return std::nullopt;
  const auto api_version = object.find("apiVersion");
  const auto kind = object.find("kind");
  if (api_version == object.end() || kind == object.end() || !api_version->is_string() ||
      !kind->is_string()) {
    return std::nullopt;
  }
  const auto found =
      KindOf(api_version->get_ref<const std::string&>(), kind->get_ref<const std::string&>());
  if (!found || !KindInfoOf(*found).job) return std::nullopt;
  return found;
}

bool PodGated(const KindInfo& info) { return info.job && info.suspend_field.empty(); }

bool RunsRanks(const KindInfo& info, std::string_view role) {
  return role.empty() || std::find(info.rankless_roles.begin(), info.rankless_roles.end(), role) ==
                             info.rankless_roles.end();
}

}  // namespace ncclguard::core
