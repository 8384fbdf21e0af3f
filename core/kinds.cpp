#include "core/kinds.h"

#include <array>

namespace ncclguard::core {
namespace {

// Pod labels, as set by each kind's operator:
//   Kubeflow training-operator and mpi-operator: training.kubeflow.org/job-name
//   JobSet: jobset.sigs.k8s.io/jobset-name
//   batch/v1 Job controller (Kubernetes >= 1.27): batch.kubernetes.io/job-name
// Pod comes first: ManagedKinds() is the rest of the table.
constexpr std::array<KindInfo, 5> kKinds{{
    {WorkloadKind::Pod, "v1", "Pod", "pods", TemplateLayout::PodSpec, "/spec", "", false, "", "",
     ConditionStyle::None, false},
    {WorkloadKind::PyTorchJob, "kubeflow.org/v1", "PyTorchJob", "pytorchjobs",
     TemplateLayout::ReplicaSpecs, "/spec/pytorchReplicaSpecs", "/spec/nprocPerNode", true,
     "training.kubeflow.org/job-name", "/spec/runPolicy/suspend", ConditionStyle::Kubeflow, true},
    {WorkloadKind::MpiJob, "kubeflow.org/v2beta1", "MPIJob", "mpijobs",
     TemplateLayout::ReplicaSpecs, "/spec/mpiReplicaSpecs", "/spec/slotsPerWorker", true,
     "training.kubeflow.org/job-name", "/spec/runPolicy/suspend", ConditionStyle::Kubeflow, false},
    {WorkloadKind::JobSet, "jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets",
     TemplateLayout::ReplicatedJobs, "/spec/replicatedJobs", "", true,
     "jobset.sigs.k8s.io/jobset-name", "/spec/suspend", ConditionStyle::Meta, true},
    {WorkloadKind::BatchJob, "batch/v1", "Job", "jobs", TemplateLayout::JobTemplate,
     "/spec/template", "", true, "batch.kubernetes.io/job-name", "/spec/suspend",
     ConditionStyle::Batch, true},
}};

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

std::span<const KindInfo> ManagedKinds() { return std::span(kKinds).subspan(1); }

std::optional<WorkloadKind> KindOf(std::string_view api_version, std::string_view kind) {
  for (const KindInfo& info : kKinds) {
    if (info.kind_name != kind) continue;
    // The core group has no name: a Pod is "v1" exactly.
    const bool matches =
        info.job ? Group(api_version) == Group(info.api_version) : api_version == info.api_version;
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

}  // namespace ncclguard::core
