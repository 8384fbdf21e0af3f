// The Kueue objects that say where topology-aware scheduling places a queue's jobs, kept in the
// shared caches (their specs only) for the in-process webhook: the controller `kueue-topology`,
// which reads and reconciles nothing else. Until Kueue's CRDs are installed the informers report
// their resources not served, and nothing is asked of Kueue.
#include "manager/kueue_topology.h"

#include <algorithm>

#include "core/json_access.h"
#include "core/kueue.h"
#include "manager/controller_module.h"
#include "manager/manager.h"

namespace ncclguard::manager {
namespace {

using core::Json;
using core::Member;

kube::ResourceRef LocalQueues() { return KueueResource("localqueues", true); }
kube::ResourceRef ClusterQueues() { return KueueResource("clusterqueues", false); }
kube::ResourceRef Flavors() { return KueueResource("resourceflavors", false); }
kube::ResourceRef Topologies() { return KueueResource("topologies", false); }

std::string StringAt(const Json* object, std::string_view key) {
  const Json* value = object == nullptr ? nullptr : Member(*object, key);
  return value != nullptr && value->is_string() ? value->get<std::string>() : std::string();
}

const Json* Spec(const kube::CachedObject& object) {
  return object == nullptr ? nullptr : Member(*object, "spec");
}

// The levels of Topology `name`; nullopt when it is not known or lists none.
std::optional<std::vector<std::string>> LevelsOf(kube::Informer& topologies,
                                                 const std::string& name) {
  const kube::CachedObject topology = topologies.Get(name);
  const Json* spec = Spec(topology);
  const Json* levels = spec == nullptr ? nullptr : Member(*spec, "levels");
  if (levels == nullptr || !levels->is_array()) return std::nullopt;
  std::vector<std::string> labels;
  for (const Json& level : *levels) {
    std::string label = StringAt(&level, "nodeLabel");
    if (!label.empty()) labels.push_back(std::move(label));
  }
  if (labels.empty()) return std::nullopt;
  return labels;
}

ControllerModule DeclareKueueTopology() {
  ControllerModule module;
  module.name = "kueue-topology";
  module.summary =
      "reads Kueue's LocalQueues, ClusterQueues, ResourceFlavors and Topologies, so that the "
      "webhook asks Kueue to place a queued job's pods in one network block";
  module.flag = "kueue-topology";
  module.reads.push_back({LocalQueues(), kube::KeepFields({"/spec/clusterQueue"}), {}});
  module.reads.push_back({ClusterQueues(), kube::KeepFields({"/spec/resourceGroups"}), {}});
  module.reads.push_back(
      {Flavors(), kube::KeepFields({"/spec/topologyName", "/spec/nodeLabels"}), {}});
  module.reads.push_back({Topologies(), kube::KeepFields({"/spec/levels"}), {}});
  module.install = [](ModuleContext&) {};
  return module;
}
NCCLGUARD_REGISTER(DeclareKueueTopology);

}  // namespace

kube::ResourceRef KueueResource(const char* plural, bool namespaced) {
  kube::ResourceRef ref;
  ref.group = core::kKueueGroup;
  ref.version = "v1beta2";
  ref.resource = plural;
  ref.namespaced = namespaced;
  return ref;
}

std::optional<std::vector<std::string>> KueueTopologyLevels(const Caches& caches,
                                                            std::string_view namespace_,
                                                            std::string_view queue) {
  kube::Informer *local_queues = nullptr, *cluster_queues = nullptr, *flavors = nullptr,
                 *topologies = nullptr;
  try {
    local_queues = &caches.Get(LocalQueues());
    cluster_queues = &caches.Get(ClusterQueues());
    flavors = &caches.Get(Flavors());
    topologies = &caches.Get(Topologies());
  } catch (const std::out_of_range&) {
    return std::nullopt;  // --kueue-topology is off
  }
  const kube::CachedObject local_queue =
      local_queues->Get(kube::ObjectKey(std::string(namespace_), std::string(queue)));
  const std::string cluster_queue = StringAt(Spec(local_queue), "clusterQueue");
  if (cluster_queue.empty()) return std::nullopt;
  const kube::CachedObject queue_object = cluster_queues->Get(cluster_queue);
  const Json* spec = Spec(queue_object);
  const Json* groups = spec == nullptr ? nullptr : Member(*spec, "resourceGroups");
  if (groups == nullptr || !groups->is_array()) return std::nullopt;
  std::optional<std::vector<std::string>> levels;
  for (const Json& group : *groups) {
    const Json* group_flavors = Member(group, "flavors");
    if (group_flavors == nullptr || !group_flavors->is_array()) continue;
    for (const Json& flavor : *group_flavors) {
      const kube::CachedObject flavor_object = flavors->Get(StringAt(&flavor, "name"));
      const std::string topology = StringAt(Spec(flavor_object), "topologyName");
      if (topology.empty()) continue;
      const auto these = LevelsOf(*topologies, topology);
      if (!these) return std::nullopt;  // a Topology not (yet) known: ask for nothing
      if (!levels) {
        levels = *these;
        continue;
      }
      std::erase_if(*levels, [&](const std::string& level) {
        return std::find(these->begin(), these->end(), level) == these->end();
      });
    }
  }
  if (levels && levels->empty()) return std::nullopt;
  return levels;
}

}  // namespace ncclguard::manager
