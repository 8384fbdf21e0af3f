#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/kinds.h"

namespace ncclguard::core {

// One pod template inside a workload: where its PodSpec is and how many pods it starts.
struct PodTemplate {
  std::string role;       // "Master", "Worker", "Launcher", a JobSet replicatedJob name, or ""
  JsonPointer pod_spec;   // pointer to the PodSpec inside the object
  std::int64_t pods = 1;  // pods started from this template
  std::int64_t ranks_per_pod =
      0;  // declared processes per pod (nprocPerNode, slotsPerWorker); 0 = unset
};

struct Workload {
  WorkloadKind kind;
  std::vector<PodTemplate> templates;
};

// Finds the pod templates of a Pod, batch/v1 Job, PyTorchJob, MPIJob, JobSet or
// HyperPodPyTorchJob, where the kind
// table (core/kinds.h) says they are. Other kinds (and
// objects without apiVersion/kind) yield nullopt and pass through untouched. Throws InputError
// when a field the model reads has the wrong type.
std::optional<Workload> ParseWorkload(const Json& object);

}  // namespace ncclguard::core
