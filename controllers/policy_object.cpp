#include "controllers/policy_object.h"

#include "controllers/conditions.h"
#include "controllers/json_fields.h"
#include "core/errors.h"

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
  core::Policy policy;
  try {
    policy = core::ParsePolicy(user_part.dump());
  } catch (const core::PolicyError& e) {
    throw core::PolicyError(name + ": " + e.what());
  }
  // What the controller learned from the nodes (status.observedInstanceTypes). The status is the
  // controller's to write, and it writes it again from the nodes: an unreadable one is not the
  // policy author's error and leaves only the built-in catalog and the policy's entries.
  try {
    policy.Learn(core::ParseObservedCatalog(object));
  } catch (const core::PolicyError&) {
  }
  return policy;
}

std::optional<core::Json> PolicyStatusPatch(const core::Json& object,
                                            const std::optional<std::string>& error,
                                            Timestamp now) {
  const Condition accepted{"Accepted", error ? "False" : "True", error ? "Invalid" : "Valid",
                           error ? *error : "the controller and the webhook use this policy",
                           std::nullopt};
  const std::int64_t generation = object.is_object() && object.contains("metadata")
                                      ? IntField(object["metadata"], "generation")
                                      : 0;
  auto conditions = WithCondition(object, accepted, core::ConditionStyle::Meta, now);
  const bool generation_current =
      object.is_object() && object.contains("status") &&
      IntField(object["status"], "observedGeneration", -1) == generation;
  if (!conditions && generation_current) return std::nullopt;
  core::Json status{{"observedGeneration", generation}};
  if (conditions) {
    status["conditions"] = std::move(*conditions);
  } else {
    status["conditions"] = object["status"]["conditions"];
  }
  return core::Json{{"status", std::move(status)}};
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
