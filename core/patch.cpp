#include "core/patch.h"

#include <stdexcept>

namespace ncclguard::core {

namespace {
bool Contains(const Json& root, const JsonPointer& at) {
  try {
    return root.contains(at) && !root.at(at).is_null();
  } catch (const Json::exception&) {
    return false;  // the pointer runs through a scalar: the target cannot exist
  }
}
}  // namespace

bool PatchPlan::Exists(const JsonPointer& at) const { return Contains(Current(), at); }

Json& PatchPlan::Patched() {
  if (!patched_) patched_ = *base_;
  return *patched_;
}

void PatchPlan::Add(const JsonPointer& at, Json value) {
  if (Exists(at)) throw std::logic_error("PatchPlan::Add: " + at.to_string() + " exists");
  // Wrap the value in objects for each missing parent, so one operation creates the whole branch.
  JsonPointer target = at;
  while (!target.parent_pointer().empty() && !Exists(target.parent_pointer())) {
    Json wrapper = Json::object();
    wrapper[target.back()] = std::move(value);
    value = std::move(wrapper);
    target = target.parent_pointer();
  }
  const JsonPointer parent = target.parent_pointer();
  if (!Exists(parent) || !Current().at(parent).is_object()) {
    throw std::logic_error("PatchPlan::Add: parent of " + at.to_string() + " is not an object");
  }
  ops_.push_back(Json{{"op", "add"}, {"path", target.to_string()}, {"value", value}});
  Patched().at(parent)[target.back()] = std::move(value);
}

void PatchPlan::Append(const JsonPointer& at, Json item) {
  if (!Exists(at)) {
    Add(at, Json::array({std::move(item)}));
    return;
  }
  if (!Current().at(at).is_array()) {
    throw std::logic_error("PatchPlan::Append: " + at.to_string() + " is not a list");
  }
  ops_.push_back(Json{{"op", "add"}, {"path", at.to_string() + "/-"}, {"value", item}});
  Patched().at(at).push_back(std::move(item));
}

Json PatchPlan::TakeResult() {
  if (patched_) return std::move(*patched_);
  return *base_;
}

}  // namespace ncclguard::core
