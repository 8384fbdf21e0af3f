#include "manager/kueue_wiring.h"

#include <memory>

#include "controllers/kueue_check.h"
#include "controllers/labels.h"
#include "core/kueue.h"
#include "manager/cache.h"
#include "manager/wiring.h"

namespace ncclguard::manager {
namespace {

using controllers::AdmissionCheckKey;
using controllers::WorkloadKey;
using core::Json;

kube::ResourceRef KueueResource(const char* plural, bool namespaced) {
  kube::ResourceRef ref;
  ref.group = core::kKueueGroup;
  ref.version = "v1beta2";
  ref.resource = plural;
  ref.namespaced = namespaced;
  return ref;
}

std::unique_ptr<kube::Informer> MakeInformer(const Manager& manager, kube::ResourceRef resource) {
  kube::InformerOptions options;
  options.resource = std::move(resource);
  return std::make_unique<kube::Informer>(manager.client(), std::move(options));
}

struct KueueCaches {
  std::unique_ptr<kube::Informer> workloads, admission_checks, flavors;

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
  spec.watches.push_back({kueue->admission_checks.get(),
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
  // Nodes and their validations answer the Workloads whose check is still Pending.
  const auto pending = [kueue](const Json&) {
    const std::vector<std::string> checks = kueue->PreflightChecks();
    return kueue->Workloads(
        [&checks](const Json& workload) { return controllers::HasPendingCheck(workload, checks); });
  };
  spec.watches.push_back(
      {kueue->workloads.get(),
       [](const Json& workload) {
         return std::vector<WorkloadKey>{
             {controllers::Meta(workload, "namespace"), controllers::Meta(workload, "name")}};
       },
       nullptr});
  spec.watches.push_back({kueue->admission_checks.get(), all, nullptr});
  spec.watches.push_back({kueue->flavors.get(), all, nullptr});
  spec.watches.push_back({&caches.nodes(), pending, nullptr});
  spec.watches.push_back({&caches.node_validations(), pending, nullptr});
  spec.watches.push_back({&caches.policies(), all, nullptr});
  spec.all_keys = [kueue] { return kueue->Workloads([](const Json&) { return true; }); };
  spec.reconcile = [kueue, &caches, &policy](const WorkloadKey& key) {
    const CacheView view(caches, policy.Current());
    controllers::KueueObjects objects;
    objects.preflight_checks = kueue->PreflightChecks();
    objects.flavor = [&kueue](std::string_view name) -> std::optional<Json> {
      const kube::CachedObject flavor = kueue->flavors->Get(std::string(name));
      return flavor ? std::optional<Json>(*flavor) : std::nullopt;
    };
    const kube::CachedObject workload =
        kueue->workloads->Get(kube::ObjectKey(key.namespace_, key.name));
    return controllers::ReconcileWorkloadChecks(
        workload ? std::optional<Json>(*workload) : std::nullopt, objects, view,
        std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
  };
  return spec;
}

}  // namespace

void AddKueueAdmissionCheck(Manager& manager, int workers) {
  auto kueue = std::make_shared<KueueCaches>();
  kueue->workloads = MakeInformer(manager, KueueResource("workloads", true));
  kueue->admission_checks = MakeInformer(manager, KueueResource("admissionchecks", false));
  kueue->flavors = MakeInformer(manager, KueueResource("resourceflavors", false));
  manager.AddController(AdmissionCheckController(kueue));
  manager.AddController(
      WorkloadCheckController(kueue, manager.caches(), manager.policy(), workers));
  // The informers run on every replica, like the manager's own caches.
  manager.Add({"kueue-informers", false, [kueue](const kube::StopToken& stop) {
                 for (auto* informer : {kueue->workloads.get(), kueue->admission_checks.get(),
                                        kueue->flavors.get()}) {
                   informer->Start();
                 }
                 while (!stop.WaitFor(std::chrono::hours(1))) {
                 }
                 for (auto* informer : {kueue->workloads.get(), kueue->admission_checks.get(),
                                        kueue->flavors.get()}) {
                   informer->Stop();
                 }
               }});
}

}  // namespace ncclguard::manager
