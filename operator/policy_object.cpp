#include "operator/policy_object.h"

#include "core/errors.h"
#include "operator/json_fields.h"

namespace ncclguard::controllers {

core::Policy PolicyFromObject(const core::Json& object) {
  std::string name = "NcclPolicy";
  if (object.is_object() && object.contains("metadata")) {
    const std::string object_name = StringField(object["metadata"], "name");
    if (!object_name.empty()) name += " " + object_name;
  }
  if (!object.is_object()) throw core::PolicyError(name + ": expected an object");
  // ParsePolicy reads the object's YAML form (JSON is YAML). It accepts only what a user writes;
  // the server's metadata and the status are not policy.
  core::Json user_part = core::Json::object();
  for (const char* key : {"apiVersion", "kind", "spec"}) {
    if (object.contains(key)) user_part[key] = object[key];
  }
  try {
    return core::ParsePolicy(user_part.dump());
  } catch (const core::PolicyError& e) {
    throw core::PolicyError(name + ": " + e.what());
  }
}

std::optional<std::string> PolicyHolder::Update(const std::optional<core::Json>& object) {
  if (!object) {
    current_ = core::Policy::Defaults();
    return std::nullopt;
  }
  try {
    current_ = PolicyFromObject(*object);
    return std::nullopt;
  } catch (const core::PolicyError& e) {
    return std::string(e.what()) + " (keeping the previous policy)";
  }
}

}  // namespace ncclguard::controllers
