#include "kube/owner_reference.h"

#include <exception>
#include <stdexcept>

#include "kube/resource.h"
#include "log/log.h"

namespace ncclguard::kube {

core::Json OwnerReference::ToJson() const {
  return {{"apiVersion", api_version}, {"kind", kind}, {"name", name}, {"uid", uid}};
}

bool HasOwnerReference(const core::Json& object, const OwnerReference& owner) {
  if (!object.is_object()) return false;
  const auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return false;
  const auto references = metadata->find("ownerReferences");
  if (references == metadata->end() || !references->is_array()) return false;
  for (const core::Json& reference : *references) {
    if (reference.is_object() && reference.value("uid", "") == owner.uid) return true;
  }
  return false;
}

bool AddOwnerReference(core::Json& object, const std::optional<OwnerReference>& owner) {
  if (!owner || !object.is_object() || HasOwnerReference(object, *owner)) return false;
  core::Json& metadata = object["metadata"];
  if (!metadata.is_object()) metadata = core::Json::object();
  core::Json& references = metadata["ownerReferences"];
  if (!references.is_array()) references = core::Json::array();
  references.push_back(owner->ToJson());
  return true;
}

std::optional<OwnerReference> ServiceAccountOwner(Client& client, const std::string& namespace_,
                                                  const std::string& name) {
  if (name.empty()) return std::nullopt;
  const ResourceRef ref{"", "v1", "serviceaccounts", true, namespace_, name};
  try {
    const core::Json account = client.Get(ref);
    const auto metadata = account.find("metadata");
    const std::string uid = metadata != account.end() && metadata->is_object()
                                ? metadata->value("uid", std::string())
                                : std::string();
    if (uid.empty()) throw std::runtime_error("it has no metadata.uid");
    log::Info("owner of the Secret and Lease the controller creates",
              {{"owner", ref.Describe()}, {"uid", uid}});
    return OwnerReference{"v1", "ServiceAccount", name, uid};
  } catch (const std::exception& error) {
    log::Warn(
        "reading the owner failed: the Secret and Lease the controller creates get no owner and "
        "are not deleted on uninstall",
        {{"owner", ref.Describe()}, {"error", error.what()}});
    return std::nullopt;
  }
}

}  // namespace ncclguard::kube
