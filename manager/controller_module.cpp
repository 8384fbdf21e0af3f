#include "manager/controller_module.h"

#include <map>
#include <set>
#include <tuple>

#include "manager/cache.h"
#include "manager/manager.h"

namespace ncclguard::manager {
namespace {

// The manager's own needs, beside the modules': Events (every controller's executor writes
// them), the Lease, and the owner ServiceAccount it reads.
std::vector<Access> ManagerAccess(const ManagerOptions& options) {
  std::vector<Access> access;
  access.push_back(Access("events.k8s.io", {"events"}, {"create", "patch"},
                          "Events: new ones (create) and series counts of repeated ones (patch)"));
  if (options.leader_elect) {
    access.push_back(Access("coordination.k8s.io", {"leases"}, {"create"},
                            "leader election: the first replica creates the Lease")
                         .InOwnNamespace());
    access.push_back(Access("coordination.k8s.io", {"leases"}, {"get", "update"},
                            "leader election: read, renew or take over the Lease")
                         .InOwnNamespace()
                         .Named({options.lease_name}));
  }
  if (options.owner) {
    access.push_back(Access("", {"serviceaccounts"}, {"get"},
                            "owner references: the controller's own ServiceAccount")
                         .InOwnNamespace()
                         .Named({options.owner->name}));
  }
  return access;
}

}  // namespace

bool ModuleEnabled(const ControllerModule& module, const ManagerOptions& options) {
  return module.flag.empty() || options.enable.contains(module.flag);
}

std::vector<Access> RequiredAccess(const ManagerOptions& options,
                                   const std::vector<Access>& extra) {
  std::vector<Access> wanted = ManagerAccess(options);
  for (const Reads& reads : ManagerReads()) {
    wanted.push_back(Access(reads.resource.group, {reads.resource.resource}, {"list", "watch"},
                            "the manager's caches"));
  }
  for (const ControllerModule* module : ControllerModules()) {
    if (!ModuleEnabled(*module, options)) continue;
    // What a controller reads it lists and watches.
    for (const Reads& reads : module->reads) {
      wanted.push_back(Access(reads.resource.group, {reads.resource.resource}, {"list", "watch"},
                              module->name + ": its cache"));
    }
    wanted.insert(wanted.end(), module->access.begin(), module->access.end());
  }
  wanted.insert(wanted.end(), extra.begin(), extra.end());
  // One rule per (scope, group, resource names, resource), verbs merged; then rules with equal
  // verbs merged over resources.
  using Scope = std::tuple<bool, std::string, std::vector<std::string>>;
  std::map<Scope, std::map<std::string, std::set<std::string>>> verbs;
  for (const Access& access : wanted) {
    auto& by_resource = verbs[{access.in_own_namespace, access.group, access.resource_names}];
    for (const std::string& resource : access.resources) {
      by_resource[resource].insert(access.verbs.begin(), access.verbs.end());
    }
  }
  std::vector<Access> rules;
  for (const auto& [scope, by_resource] : verbs) {
    std::map<std::set<std::string>, std::vector<std::string>> by_verbs;
    for (const auto& [resource, verb_set] : by_resource) by_verbs[verb_set].push_back(resource);
    for (const auto& [verb_set, resources] : by_verbs) {
      Access rule;
      std::tie(rule.in_own_namespace, rule.group, rule.resource_names) = scope;
      rule.resources = resources;
      rule.verbs.assign(verb_set.begin(), verb_set.end());
      rules.push_back(std::move(rule));
    }
  }
  return rules;
}

core::Json AccessAsRbac(const std::vector<Access>& rules) {
  core::Json out{{"clusterRules", core::Json::array()}, {"namespaceRules", core::Json::array()}};
  for (const Access& rule : rules) {
    core::Json entry{
        {"apiGroups", {rule.group}}, {"resources", rule.resources}, {"verbs", rule.verbs}};
    if (!rule.resource_names.empty()) entry["resourceNames"] = rule.resource_names;
    out[rule.in_own_namespace ? "namespaceRules" : "clusterRules"].push_back(std::move(entry));
  }
  return out;
}

}  // namespace ncclguard::manager
