#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "controllers/actions.h"
#include "controllers/timestamps.h"
#include "core/json.h"
#include "core/policy.h"

namespace ncclguard::controllers {

// A work-queue key of the NcclPolicy controller: the cluster-scoped object's name.
struct PolicyKey {
  std::string name;

  std::string ToString() const { return name; }
  static std::optional<PolicyKey> Parse(std::string_view text);
  bool operator==(const PolicyKey&) const = default;
};

// The NcclPolicy controller: tells the author of the NcclPolicy "default" whether the controller
// and the webhook use it (condition Accepted, observedGeneration; PolicyStatusPatch). `object` is
// the cached NcclPolicy (nullopt: deleted, nothing to write). Any other name: no actions (only
// "default" is read). Level-triggered: once the status says so, no actions.
//
// It also publishes the catalog learned from `nodes` (the Node cache) in
// status.observedInstanceTypes (controllers/observed_catalog.h), rewritten only when it changes.
ReconcileResult ReconcileNcclPolicy(const PolicyKey& key, const std::optional<core::Json>& object,
                                    const std::vector<core::Json>& nodes, Timestamp now);
// The same with the catalog already learned from the nodes (InstanceTypeObserver over the cache).
ReconcileResult ReconcileNcclPolicyWithCatalog(const PolicyKey& key,
                                               const std::optional<core::Json>& object,
                                               std::vector<core::ObservedInstanceType> seen,
                                               Timestamp now);

}  // namespace ncclguard::controllers
