#include "core/patch.h"

#include <stdexcept>

#include "core/errors.h"
#include "core/json_access.h"

namespace ncclguard::core {
namespace {

const Json* FindIn(const Json& root, const JsonPointer& at) {
  if (!root.contains(at)) return nullptr;  // also false through a scalar
  const Json& node = root.at(at);
  return node.is_null() ? nullptr : &node;
}

// {"op": "add", "path": path, "value": value}, members in that order. Built member by member: an
// initializer list would copy the value (a whole volume or env entry) once more.
Json AddOperation(std::string path, Json value) {
  Json op = Json::object();
  auto& members = static_cast<Json::object_t::Container&>(op.get_ref<Json::object_t&>());
  members.reserve(3);
  members.emplace_back("op", "add");
  members.emplace_back("path", std::move(path));
  members.emplace_back("value", std::move(value));
  return op;
}

// {"op": "replace", "path": path, "value": value}, built as AddOperation builds its own.
Json ReplaceOperation(std::string path, Json value) {
  Json op = AddOperation(std::move(path), std::move(value));
  op["op"] = "replace";
  return op;
}

}  // namespace

PatchPlan::Created* PatchPlan::CreatedContaining(const JsonPointer& at, JsonPointer& relative) {
  if (created_.empty()) return nullptr;
  const std::string text = at.to_string();
  // The path itself, then each parent ("/a/b/c", "/a/b", "/a"): one lookup a level.
  for (std::size_t end = text.size(); end > 0; end = text.rfind('/', end - 1)) {
    const auto found = created_at_.find(text.substr(0, end));
    if (found != created_at_.end()) {
      relative = end == text.size() ? JsonPointer() : JsonPointer(text.substr(end));
      return &created_[found->second];
    }
  }
  return nullptr;
}

const Json* PatchPlan::Find(const JsonPointer& at) const {
  if (const Json* node = FindIn(*base_, at)) return node;
  if (created_.empty()) return nullptr;
  JsonPointer relative;
  Created* created = const_cast<PatchPlan*>(this)->CreatedContaining(at, relative);
  return created == nullptr ? nullptr : FindIn(created->value, relative);
}

bool PatchPlan::Exists(const JsonPointer& at) const { return Find(at) != nullptr; }

void PatchPlan::Add(const JsonPointer& at, Json value) {
  if (Exists(at)) throw std::logic_error("PatchPlan::Add: " + at.to_string() + " exists");
  // Wrap the value in objects for each missing parent, so one operation creates the whole branch.
  JsonPointer target = at;
  JsonPointer parent = target.parent_pointer();
  const Json* parent_node = base_;
  while (!parent.empty() && (parent_node = Find(parent)) == nullptr) {
    Json wrapper = Json::object();
    wrapper[target.back()] = std::move(value);
    value = std::move(wrapper);
    target = std::move(parent);
    parent = target.parent_pointer();
    parent_node = base_;
  }
  if (!parent_node->is_object()) {
    // The input holds a list or a scalar where the fix needs an object (a securityContext that
    // is a list): the input's fault, said like every other field of the wrong type.
    throw InputError(parent.to_string() + ": expected an object, got " + parent_node->type_name());
  }
  std::string target_text = target.to_string();
  Record(AddOperation(target_text, value), {parent, target.back(), false});
  JsonPointer relative;
  if (Created* created = CreatedContaining(parent, relative)) {
    created->value[relative][target.back()] = std::move(value);
  } else {
    created_.push_back({std::move(target), std::move(target_text), std::move(value)});
    created_at_.emplace(created_.back().at_text, created_.size() - 1);
  }
}

void PatchPlan::Append(const JsonPointer& at, Json item) {
  const Json* list = Find(at);
  if (list == nullptr) {
    Add(at, Json::array({std::move(item)}));
    return;
  }
  if (!list->is_array()) {
    throw InputError(at.to_string() + ": expected a list, got " + list->type_name());
  }
  Record(AddOperation(at.to_string() + "/-", item), {at, std::string(), true});
  JsonPointer relative;
  if (Created* created = CreatedContaining(at, relative))
    created->value[relative].push_back(std::move(item));
}

void PatchPlan::Replace(const JsonPointer& at, Json value) {
  if (at.empty() || FindIn(*base_, at) == nullptr) {
    throw std::logic_error("PatchPlan::Replace: " + at.to_string() + " is not in the object");
  }
  Record(ReplaceOperation(at.to_string(), value), {at.parent_pointer(), at.back(), false});
}

void PatchPlan::Record(Json op, Target target) {
  ops_.push_back(std::move(op));
  try {
    targets_.push_back(std::move(target));
  } catch (...) {
    ops_.pop_back();  // the two stay one for one, whatever a spent budget refuses
    throw;
  }
}

void PatchPlan::ApplyTo(Json& working, Json& patch) {
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    Json& op = ops_[i];
    const Target& target = targets_[i];
    Json* parent = working.contains(target.parent) ? &working.at(target.parent) : nullptr;
    const Json& value = op.back();  // AddOperation's (and ReplaceOperation's) last member
    if (parent != nullptr && !target.append && parent->is_object()) {
      // A new member without ordered_json's growth of the object, which copies every member
      // with its subtree (adding spec.subdomain would copy the whole pod spec).
      if (!parent->contains(target.key)) ReserveMember(*parent);
      (*parent)[target.key] = value;
    } else if (parent != nullptr && target.append && parent->is_array()) {
      parent->push_back(value);
    } else {
      working.patch_inplace(Json::array({op}));  // not where the plan saw it: as RFC 6902 says
    }
    patch.push_back(std::move(op));
  }
  ops_.clear();
  targets_.clear();
}

}  // namespace ncclguard::core
