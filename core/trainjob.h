// Kubeflow Trainer v2's TrainJob as the Trainer turns it into pods. A TrainJob has no pod template
// of its own: it names a runtime (a TrainingRuntime or ClusterTrainingRuntime, whose template is a
// JobSet's), and the Trainer makes one JobSet of it named as the TrainJob, with spec.trainer
// applied to the container "node" of the replicatedJob "node" and spec.runtimePatches applied in
// order. The rules check that JobSet (the pods every TrainJob of the runtime gets), and the fixes
// they make come back as ncclguard's own entry in spec.runtimePatches, where Trainer allows them.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/contract.h"
#include "core/json.h"
#include "core/kinds.h"

namespace ncclguard::core {

// The replicatedJob, and its container, that spec.trainer configures.
inline constexpr std::string_view kTrainerNode = "node";

struct RuntimeRef {
  WorkloadKind kind = WorkloadKind::ClusterTrainingRuntime;
  std::string name;
};

// spec.runtimeRef: the kind defaults to ClusterTrainingRuntime (as Trainer's API does); nullopt
// without a name or for a kind that is not a runtime. Throws InputError on wrong types.
std::optional<RuntimeRef> RuntimeRefOf(const Json& trainjob);

// Finds a runtime by reference, in the TrainJob's namespace for a TrainingRuntime: the documents
// of a `lint` run, or the controller's cache. nullopt when it is not known.
using RuntimeLookup = std::function<std::optional<Json>(const RuntimeRef&, std::string_view ns)>;

// The JobSet the Trainer makes of `trainjob` from `runtime` (nullptr: not known; then one
// replicatedJob "node" with the container "node", which is all spec.trainer describes):
//   - spec.trainer: image, command and args replace the container's, env entries replace those of
//     the same name, resourcesPerNode replaces its resources, numNodes (else the runtime's
//     mlPolicy.numNodes, else 1) is the "node" job's parallelism and completions;
//   - spec.runtimePatches in order: labels and annotations, the pod's volumes (by name),
//     nodeSelector, tolerations, schedulingGates and the other fields a patch may set, each
//     container's env (by name), volumeMounts (by mountPath) and securityContext (merged).
// Throws InputError when a field it reads has the wrong type.
Json RenderTrainJob(const Json& trainjob, const Json* runtime);

// The runtime patch that says what the fixes changed between `rendered` and `fixed` (both from
// RenderTrainJob; `fixed` with the fix rules applied) in the fields a patch may set: the pod
// template's annotations (Kueue's topology request), the pods' volumes, and each container's
// volumeMounts and securityContext. Env and resources are left to
// the pods' admission: Trainer refuses env of the container "node" in a patch, and a patch has no
// resources. nullopt when there is nothing to say.
std::optional<Json> RuntimePatchOf(const Json& rendered, const Json& fixed);

// Whether `trainjob` already carries ncclguard's runtime patch (entries are immutable once made).
bool HasRuntimePatch(const Json& trainjob);

}  // namespace ncclguard::core
