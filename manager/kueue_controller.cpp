// The preflight AdmissionCheck for Kueue (controllers/kueue_check.h) as a controller of the
// manager: Kueue's Workloads, AdmissionChecks and ResourceFlavors (kueue.x-k8s.io/v1beta2) in the
// shared caches, two controllers that run while leading. Turned on by
// `ncclguard controller --kueue-admission-check` (the chart's kueue.admissionCheck.enabled).
// Until Kueue's CRDs are installed the informers report their resources not served and the
// controllers wait for them without holding the others up.
#include <memory>

#include "controllers/kueue_check.h"
#include "controllers/labels.h"
#include "core/kueue.h"
#include "manager/cache.h"
#include "manager/controller_module.h"
#include "manager/kueue_topology.h"
#include "manager/manager.h"
#include "manager/projections.h"
#include "manager/state_metrics.h"
#include "manager/waiting_keys.h"
#include "manager/wiring.h"

namespace ncclguard::manager {
namespace {

using controllers::AdmissionCheckKey;
using controllers::WorkloadKey;
using core::Json;

kube::ResourceRef WorkloadResource() { return KueueResource("workloads", true); }
kube::ResourceRef AdmissionCheckResource() { return KueueResource("admissionchecks", false); }
kube::ResourceRef FlavorResource() { return KueueResource("resourceflavors", false); }

struct KueueCaches {
  explicit KueueCaches(const Caches& caches)
      : workloads(&caches.Get(WorkloadResource())),
        admission_checks(&caches.Get(AdmissionCheckResource())),
        flavors(&caches.Get(FlavorResource())) {}

  kube::Informer *workloads, *admission_checks, *flavors;

  std::vector<std::string> PreflightChecks() const {
    std::vector<std::string> names;
    for (const auto& check : admission_checks->List()) {
      if (controllers::IsPreflightCheck(*check)) names.push_back(controllers::Meta(*check, "name"));
    }
    return names;
  }

  // Workloads that `keep` accepts.
  template <typename Filter>
  std::vector<WorkloadKey> Workloads(Filter&& keep) const {
    std::vector<WorkloadKey> keys;
    for (const auto& workload : workloads->List()) {
      if (!keep(*workload)) continue;
      keys.push_back(
          {controllers::Meta(*workload, "namespace"), controllers::Meta(*workload, "name")});
    }
    return keys;
  }
};

ControllerSpec<AdmissionCheckKey> AdmissionCheckController(std::shared_ptr<KueueCaches> kueue) {
  ControllerSpec<AdmissionCheckKey> spec;
  spec.name = "kueue-admissioncheck";
  spec.watches.push_back({kueue->admission_checks,
                          [](const Json& check) {
                            return std::vector<AdmissionCheckKey>{
                                {controllers::Meta(check, "name")}};
                          },
                          nullptr});
  spec.all_keys = [kueue] {
    std::vector<AdmissionCheckKey> keys;
    for (const std::string& name : kueue->PreflightChecks()) keys.push_back({name});
    return keys;
  };
  spec.reconcile = [kueue](const AdmissionCheckKey& key) {
    const kube::CachedObject check = kueue->admission_checks->Get(key.name);
    return controllers::ReconcileAdmissionCheck(
        check ? std::optional<Json>(*check) : std::nullopt,
        std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
  };
  return spec;
}

ControllerSpec<WorkloadKey> WorkloadCheckController(std::shared_ptr<KueueCaches> kueue,
                                                    const Caches& caches,
                                                    const PolicySource& policy, int workers) {
  ControllerSpec<WorkloadKey> spec;
  spec.name = "kueue-preflight";
  spec.workers = workers;
  const auto all = [kueue](const Json&) {
    return kueue->Workloads([](const Json&) { return true; });
  };
  spec.watches.push_back(
      {kueue->workloads,
       [](const Json& workload) {
         return std::vector<WorkloadKey>{
             {controllers::Meta(workload, "namespace"), controllers::Meta(workload, "name")}};
       },
       nullptr});
  spec.watches.push_back({kueue->admission_checks, all, nullptr});
  spec.watches.push_back({kueue->flavors, all, nullptr});
  // A node's change wakes the Workloads whose check waits for its instance type.
  auto waiting = std::make_shared<WaitingKeys<WorkloadKey>>();
  for (Watch<WorkloadKey>& watch : NodeChangeWatches<WorkloadKey>(caches, policy, waiting)) {
    spec.watches.push_back(std::move(watch));
  }
  spec.watches.push_back({&caches.policies(), all, nullptr});
  // A namespace's labels changed (ncclguard.io/mode: audit answers Ready at once): its Workloads
  // still Pending.
  const auto labels = [](const Json* ns) -> Json {
    if (ns == nullptr || !ns->is_object()) return nullptr;
    const auto metadata = ns->find("metadata");
    if (metadata == ns->end() || !metadata->is_object()) return nullptr;
    const auto found = metadata->find("labels");
    return found == metadata->end() ? Json() : *found;
  };
  spec.watches.push_back({&caches.namespaces(),
                          [kueue](const Json& ns) {
                            const std::vector<std::string> checks = kueue->PreflightChecks();
                            const std::string name = controllers::Meta(ns, "name");
                            return kueue->Workloads([&](const Json& workload) {
                              return controllers::Meta(workload, "namespace") == name &&
                                     controllers::HasPendingCheck(workload, checks);
                            });
                          },
                          [labels](const Change& change) {
                            return change.new_object != nullptr && change.old_object != nullptr &&
                                   labels(change.old_object) != labels(change.new_object);
                          }});
  spec.all_keys = [kueue] { return kueue->Workloads([](const Json&) { return true; }); };
  spec.reconcile = [kueue, &caches, &policy, waiting](const WorkloadKey& key) {
    const CacheView view(caches, policy.Current());
    controllers::KueueObjects objects;
    objects.preflight_checks = kueue->PreflightChecks();
    objects.flavor = [&kueue](std::string_view name) -> std::optional<Json> {
      const kube::CachedObject flavor = kueue->flavors->Get(std::string(name));
      return flavor ? std::optional<Json>(*flavor) : std::nullopt;
    };
    const kube::CachedObject workload =
        kueue->workloads->Get(kube::ObjectKey(key.namespace_, key.name));
    controllers::ReconcileResult result = controllers::ReconcileWorkloadChecks(
        workload ? std::optional<Json>(*workload) : std::nullopt, objects, view,
        std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
    waiting->Record(key, result.waiting_for);
    return result;
  };
  return spec;
}

ControllerModule DeclareKueuePreflight() {
  ControllerModule module;
  module.name = "kueue-preflight";
  module.summary =
      "answers Kueue AdmissionChecks with controllerName ncclguard.io/preflight (and their "
      "Active condition)";
  module.flag = "kueue-admission-check";
  // Workloads, checks and flavors are kept whole: the check reads their pod sets and
  // node labels, and there are as many Workloads as jobs, which are kept whole too.
  for (const kube::ResourceRef& resource :
       {WorkloadResource(), AdmissionCheckResource(), FlavorResource()}) {
    module.reads.push_back({resource, nullptr, {}});
  }
  // The gate's questions go to the Nodes and NodeValidations the manager reads for every
  // controller (ManagerReads); a changed policy requeues every Workload.
  module.reads.push_back({watched::NcclPolicies(), nullptr, {}});
  // A namespace's ncclguard.io/mode label: audit mode answers Ready at once.
  module.reads.push_back({kube::resources::Namespaces(), NamespaceProjection(), {}});
  module.access.push_back(Access(
      std::string(core::kKueueGroup), {"workloads/status", "admissionchecks/status"}, {"patch"},
      "Kueue preflight: server-side apply of its own check entry and Active "
      "condition only"));
  module.install = [](ModuleContext& context) {
    auto kueue = std::make_shared<KueueCaches>(context.caches());
    context.AddStateMetrics([kueue](std::vector<prometheus::MetricFamily>& out) {
      out.push_back(KueueChecksFamily(EachIn(*kueue->workloads), kueue->PreflightChecks()));
    });
    context.AddController(AdmissionCheckController(kueue));
    context.AddController(WorkloadCheckController(kueue, context.caches(), context.policy(),
                                                  context.options().workers));
  };
  return module;
}
NCCLGUARD_REGISTER(DeclareKueuePreflight);

}  // namespace

}  // namespace ncclguard::manager
