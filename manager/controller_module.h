// What a controller declares about itself, so that the manager, the CLI and the chart's checks
// learn about it from one place (docs/operator.md "Adding a controller"):
//   - the resources it reads through the shared caches, with the fields it keeps of them and the
//     indexes it looks them up by (the caches hold the union of every enabled controller's);
//   - the RBAC it needs (`ncclguard controller --print-rbac`, checked against the chart);
//   - whether it is always on or turned on by a flag of `ncclguard controller`;
//   - how it adds its controllers and runnables to the manager.
// A controller registers its declaration from its own .cpp:
// NCCLGUARD_REGISTER(DeclareMyController); where DeclareMyController() returns its ControllerModule
// (core/registry.h). The manager archive is linked whole.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "core/registry.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/resource.h"
#include "manager/controller.h"
#include "manager/metrics.h"
#include "manager/state_metrics.h"

namespace ncclguard::manager {

class Caches;
class PolicySource;
struct ManagerOptions;

// One RBAC rule: verbs on resources of one API group. Cluster-wide unless `in_own_namespace`
// (a Role in the namespace the controller runs in); `resource_names` limits it to named objects.
struct Access {
  Access() = default;
  Access(std::string api_group, std::vector<std::string> on, std::vector<std::string> allowed,
         std::string used_by)
      : group(std::move(api_group)),
        resources(std::move(on)),
        verbs(std::move(allowed)),
        why(std::move(used_by)) {}
  // In the controller's own namespace only.
  Access& InOwnNamespace() {
    in_own_namespace = true;
    return *this;
  }
  // Only the objects of these names.
  Access& Named(std::vector<std::string> names) {
    resource_names = std::move(names);
    return *this;
  }

  std::string group;  // "" for the core group
  std::vector<std::string> resources;
  std::vector<std::string> verbs;
  std::string why;  // what uses it, as the chart's comment says
  bool in_own_namespace = false;
  std::vector<std::string> resource_names;
};

// A resource a controller reads from the shared caches.
struct Reads {
  kube::ResourceRef resource;
  // The fields kept of each object (the identity fields are always kept); null: the whole
  // object. Two controllers reading one resource get the union of what each keeps.
  kube::Projection fields;
  // Lookups by index name (on the projected object).
  std::vector<std::pair<std::string, kube::IndexFunction>> indexes;
  // Which objects are cached at all (kube::InformerOptions::keep); null: every one. Two
  // controllers reading one resource get the objects either keeps.
  kube::ObjectFilter keep = nullptr;
};

// What a controller's install step adds to the manager.
class ModuleContext {
 public:
  virtual ~ModuleContext() = default;
  virtual const Caches& caches() const = 0;
  virtual std::shared_ptr<kube::Client> client() const = 0;
  // The policy in force (the NcclPolicy "default", else --policy or the defaults).
  virtual const PolicySource& policy() const = 0;
  virtual const ManagerOptions& options() const = 0;
  // Runs while leading, with its own work queue and workers; returned for Enqueue.
  virtual Controller& AddController(Controller::Spec spec) = 0;
  template <QueueKey Key>
  Controller& AddController(ControllerSpec<Key> spec) {
    return AddController(Erase(std::move(spec)));
  }
  virtual void Add(Runnable runnable) = 0;
  // Where what the controllers do is counted (manager/metrics.h).
  virtual Metrics& metrics() const = 0;
  // Gauges built from the caches when scraped, reported while this replica leads
  // (manager/state_metrics.h).
  virtual void AddStateMetrics(StateFamilies build) = 0;
};

struct ControllerModule {
  std::string name;     // "trainingjob", "kueue-preflight"
  std::string summary;  // one line, for `ncclguard controller --help` and the docs
  // Empty: always on. Else `ncclguard controller --<flag>` turns it on (ManagerOptions::enable).
  std::string flag;
  // The flag's default in `ncclguard controller`: true for a controller on unless
  // --<flag>=false. ManagerOptions::enable alone decides for a manager built in code.
  bool flag_default = false;
  std::vector<Reads> reads;
  std::vector<Access> access;
  std::function<void(ModuleContext& context)> install;
};

// By name (ControllerModules() and FindControllerModule() read it).
using ControllerRegistry = core::Registry<ControllerModule>;

// Every registered controller, in registration-independent order (by name).
inline std::span<const ControllerModule* const> ControllerModules() {
  return ControllerRegistry::All();
}
inline const ControllerModule* FindControllerModule(std::string_view name) {
  return ControllerRegistry::Find(name);
}
// Whether `module` runs with these options: always-on ones, and those whose flag is enabled.
bool ModuleEnabled(const ControllerModule& module, const ManagerOptions& options);

// The RBAC the controller process needs with these options: list and watch of what the enabled
// modules read, their own rules, the manager's (Events, leader election, the owner
// ServiceAccount) and `extra` (the webhook certificate manager's, say). Rules of one scope, group
// and resource names are merged; the result is sorted (stable for a diff).
std::vector<Access> RequiredAccess(const ManagerOptions& options,
                                   const std::vector<Access>& extra = {});

// The rules as Kubernetes writes them: {"clusterRules": [PolicyRule...], "namespaceRules": [...]}
// (each with apiGroups, resources, verbs, resourceNames where limited), for --print-rbac.
core::Json AccessAsRbac(const std::vector<Access>& rules);

}  // namespace ncclguard::manager

namespace ncclguard::core {

template <>
struct RegistryTraits<manager::ControllerModule> {
  static constexpr std::string_view kKind = "controller";
  static std::string_view Id(const manager::ControllerModule& module) { return module.name; }
};

}  // namespace ncclguard::core
