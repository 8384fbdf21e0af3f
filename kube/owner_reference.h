// Owner references on the objects the controller creates at run time (the certificate Secret,
// the leader-election Lease), so that Kubernetes' garbage collector deletes them with their
// owner: the controller's ServiceAccount, which Helm installs and deletes on uninstall.
#pragma once

#include <optional>
#include <string>

#include "core/json.h"
#include "kube/client.h"

namespace ncclguard::kube {

// metadata.ownerReferences[] entry; no controller / blockOwnerDeletion (the latter needs
// update on the owner's finalizers subresource).
struct OwnerReference {
  std::string api_version;
  std::string kind;
  std::string name;
  std::string uid;

  core::Json ToJson() const;
};

// True when `object`'s metadata.ownerReferences holds `owner` (same uid).
bool HasOwnerReference(const core::Json& object, const OwnerReference& owner);

// Adds `owner` to `object`'s metadata.ownerReferences unless there already (by uid), keeping
// the others. Returns true when it changed `object`. No-op (false) without an owner.
bool AddOwnerReference(core::Json& object, const std::optional<OwnerReference>& owner);

// The ServiceAccount `name` in `namespace_` as an owner, read with a GET (for its uid). Never
// throws: an empty name gives no owner; a failed read is logged and gives no owner, so the
// objects are created as without one (and outlive an uninstall).
std::optional<OwnerReference> ServiceAccountOwner(Client& client, const std::string& namespace_,
                                                  const std::string& name);

}  // namespace ncclguard::kube
