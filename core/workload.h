#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/kinds.h"
#include "core/trainjob.h"

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
  // A kind whose pods come from elsewhere (TemplateLayout::TrainerRuntime: a TrainJob) carries
  // the object its templates point into: the JobSet made of it (core/trainjob.h). Null for the
  // others, whose templates point into the object itself.
  std::shared_ptr<const Json> rendered;
  // Rendered without its runtime (not found, or nowhere to look: the webhook): the templates lack
  // whatever the runtime sets, such as the pods' instance type.
  bool runtime_missing = false;

  // The object the templates point into.
  const Json& Subject(const Json& object) const { return rendered ? *rendered : object; }
};

// Finds the pod templates of an object of a kind of the kind table (core/kinds.h), where the
// table says they are; a TrainJob's in the JobSet made of it and its runtime, which `runtimes`
// finds (none: the JobSet is made of the TrainJob alone). Other kinds (and objects without
// apiVersion/kind) yield nullopt and pass through untouched. Throws InputError when a field the
// model reads has the wrong type.
std::optional<Workload> ParseWorkload(const Json& object, const RuntimeLookup& runtimes = {});

// Total pods of the workload that take part as ranks (an MPIJob launcher does not).
std::int64_t RankPods(const Workload& workload);

}  // namespace ncclguard::core
