#include "controllers/job_kind.h"

#include <array>

namespace ncclguard::controllers {
namespace {

// Pod labels, as set by each kind's operator:
//   Kubeflow training-operator and mpi-operator: training.kubeflow.org/job-name
//   JobSet: jobset.sigs.k8s.io/jobset-name
//   batch/v1 Job controller (Kubernetes >= 1.27): batch.kubernetes.io/job-name
constexpr std::array<KindInfo, 4> kKinds{{
    {JobKind::PyTorchJob, "kubeflow.org/v1", "PyTorchJob", "pytorchjobs",
     "training.kubeflow.org/job-name", "/spec/runPolicy/suspend", ConditionStyle::Kubeflow, true},
    {JobKind::MpiJob, "kubeflow.org/v2beta1", "MPIJob", "mpijobs", "training.kubeflow.org/job-name",
     "/spec/runPolicy/suspend", ConditionStyle::Kubeflow, false},
    {JobKind::JobSet, "jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets",
     "jobset.sigs.k8s.io/jobset-name", "/spec/suspend", ConditionStyle::Meta, true},
    {JobKind::BatchJob, "batch/v1", "Job", "jobs", "batch.kubernetes.io/job-name", "/spec/suspend",
     ConditionStyle::Batch, true},
}};

std::string_view Group(std::string_view api_version) {
  const auto slash = api_version.find('/');
  return slash == std::string_view::npos ? std::string_view{} : api_version.substr(0, slash);
}

}  // namespace

const KindInfo& Info(JobKind kind) {
  for (const KindInfo& info : kKinds) {
    if (info.kind == kind) return info;
  }
  return kKinds.front();
}

std::span<const KindInfo> ManagedKinds() { return kKinds; }

std::optional<JobKind> KindOfObject(const Json& object) {
  if (!object.is_object()) return std::nullopt;
  const auto api_version = object.find("apiVersion");
  const auto kind = object.find("kind");
  if (api_version == object.end() || kind == object.end() || !api_version->is_string() ||
      !kind->is_string()) {
    return std::nullopt;
  }
  const auto group = Group(api_version->get_ref<const std::string&>());
  for (const KindInfo& info : kKinds) {
    if (info.kind_name == kind->get_ref<const std::string&>() && Group(info.api_version) == group) {
      return info.kind;
    }
  }
  return std::nullopt;
}

std::string JobKey::ToString() const {
  std::string text(Info(kind).kind_name);
  text += '/';
  text += namespace_;
  text += '/';
  text += name;
  return text;
}

std::optional<JobKey> JobKey::Parse(std::string_view text) {
  const auto first = text.find('/');
  if (first == std::string_view::npos) return std::nullopt;
  const auto second = text.find('/', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  const auto kind_name = text.substr(0, first);
  const auto ns = text.substr(first + 1, second - first - 1);
  const auto name = text.substr(second + 1);
  if (ns.empty() || name.empty() || name.find('/') != std::string_view::npos) return std::nullopt;
  for (const KindInfo& info : kKinds) {
    if (info.kind_name == kind_name) return JobKey{info.kind, std::string(ns), std::string(name)};
  }
  return std::nullopt;
}

}  // namespace ncclguard::controllers
