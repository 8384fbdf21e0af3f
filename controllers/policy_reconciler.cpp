#include "controllers/policy_reconciler.h"

#include "controllers/policy_object.h"
#include "core/contract.h"

namespace ncclguard::controllers {

std::optional<PolicyKey> PolicyKey::Parse(std::string_view text) {
  if (text.empty() || text.find('/') != std::string_view::npos) return std::nullopt;
  return PolicyKey{std::string(text)};
}

ReconcileResult ReconcileNcclPolicy(const PolicyKey& key, const std::optional<core::Json>& object,
                                    Timestamp now) {
  ReconcileResult result;
  if (key.name != kPolicyObjectName || !object) return result;
  // What PolicyHolder::Update says about the same object: the policy in force follows it.
  const std::optional<std::string> error = PolicyHolder().Update(*object);
  std::optional<core::Json> patch = PolicyStatusPatch(*object, error, now);
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
