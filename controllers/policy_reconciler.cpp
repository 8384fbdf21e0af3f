#include "controllers/policy_reconciler.h"

#include <utility>

#include "controllers/observed_catalog.h"
#include "controllers/policy_object.h"
#include "core/contract.h"
#include "core/errors.h"

namespace ncclguard::controllers {

std::optional<PolicyKey> PolicyKey::Parse(std::string_view text) {
  if (text.empty() || text.find('/') != std::string_view::npos) return std::nullopt;
  return PolicyKey{std::string(text)};
}

ReconcileResult ReconcileNcclPolicy(const PolicyKey& key, const std::optional<core::Json>& object,
                                    const std::vector<core::Json>& nodes, Timestamp now) {
  return ReconcileNcclPolicyWithCatalog(key, object, ObserveInstanceTypes(nodes), now);
}

ReconcileResult ReconcileNcclPolicyWithCatalog(const PolicyKey& key,
                                               const std::optional<core::Json>& object,
                                               std::vector<core::ObservedInstanceType> seen,
                                               Timestamp now) {
  ReconcileResult result;
  if (key.name != kPolicyObjectName || !object) return result;
  // What PolicyHolder::Update says about the same object: the policy in force follows it.
  const std::optional<std::string> error = PolicyHolder().Update(*object);
  std::optional<core::Json> patch = PolicyStatusPatch(*object, error, now);
  std::vector<core::ObservedInstanceType> published;
  try {
    published = core::ParseObservedCatalog(*object);
  } catch (const core::PolicyError&) {
    // Unreadable (edited by hand): written again from the nodes.
  }
  if (auto observed = ObservedCatalogUpdate(std::move(seen), published, now)) {
    if (!patch) patch = core::Json{{"status", core::Json::object()}};
    (*patch)["status"]["observedInstanceTypes"] = core::ObservedCatalogJson(*observed);
  }
  if (!patch) return result;
  ObjectRef target{.api_version = std::string(core::kApiVersion),
                   .kind = "NcclPolicy",
                   .namespace_ = "",
                   .name = key.name,
                   .uid = "",
                   .resource = "ncclpolicies"};
  if (object->contains("metadata")) target.uid = (*object)["metadata"].value("uid", "");
  result.actions.push_back(MergePatch{std::move(target), true, std::move(*patch)});
  return result;
}

}  // namespace ncclguard::controllers
