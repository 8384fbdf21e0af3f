#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/json.h"

namespace ncclguard::controllers {

using core::Json;
using core::JsonPointer;

enum class JobKind { PyTorchJob, MpiJob, JobSet, BatchJob };

// How a kind's status.conditions entries look: the controller writes its conditions in the shape
// the kind's own schema (and operator) uses.
enum class ConditionStyle {
  Kubeflow,  // kubeflow.org JobCondition: lastUpdateTime, free-form reason
  Batch,     // batch/v1 JobCondition: lastProbeTime, free-form reason
  Meta,  // metav1.Condition (JobSet): reason must match ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$
};

// What the controllers need to know about one managed kind.
struct KindInfo {
  JobKind kind;
  std::string_view api_version;  // the version the controller reads and writes
  std::string_view kind_name;    // "PyTorchJob"
  std::string_view resource;     // plural, for REST paths
  // The label each kind's operator puts on the job's pods, valued with the job's name.
  std::string_view pod_job_label;
  std::string_view suspend_field;  // JSON Pointer of the suspend flag
  ConditionStyle condition_style;
  // Whether ncclguard makes the rendezvous Service. The mpi-operator makes its own headless
  // Service named after the MPIJob (and sets its pods' subdomain to it) and resets the selector of
  // any Service of that name it controls, so a second writer would fight it.
  bool ncclguard_makes_service;
};

const KindInfo& Info(JobKind kind);
std::span<const KindInfo> ManagedKinds();
// The managed kind of an object with this apiVersion group and kind, if any.
std::optional<JobKind> KindOfObject(const Json& object);

// A work-queue key: "<Kind>/<namespace>/<name>", e.g. "PyTorchJob/team-a/llama".
struct JobKey {
  JobKind kind;
  std::string namespace_;
  std::string name;

  std::string ToString() const;
  // nullopt for a string that is not a key of a managed kind.
  static std::optional<JobKey> Parse(std::string_view text);
  bool operator==(const JobKey&) const = default;
};

}  // namespace ncclguard::controllers
