#pragma once

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/json.h"

namespace ncclguard::core {

// Builds RFC 6902 "add" operations against an object without copying it: what the operations
// create is kept beside the object, so that a rule sees its own earlier additions (a second
// Append after the first one created the list). Never replaces a value that exists.
class PatchPlan {
 public:
  explicit PatchPlan(const Json& base) : base_(&base) {}

  // True when `at` holds a non-null value in the object or in what the plan adds.
  bool Exists(const JsonPointer& at) const;
  // Adds `value` at `at` (which must not exist: std::logic_error), creating missing parent
  // objects. A parent that is not an object (a list, a scalar) is the input's fault: InputError.
  void Add(const JsonPointer& at, Json value);
  // Appends `item` to the list at `at`, creating the list and its parents when absent; a value
  // there that is not a list is an InputError.
  void Append(const JsonPointer& at, Json item);
  // Replaces the value at `at`, which the object the plan was made over must hold (else
  // std::logic_error): a fix that rewrites a field (an image pinned to its digest).
  void Replace(const JsonPointer& at, Json value);

  const std::vector<Json>& ops() const { return ops_; }
  bool empty() const { return ops_.empty(); }
  // Applies the operations, in order, to `working` (the object the plan was made over, or one
  // that still holds what it held) and moves them onto the end of `patch`, a list: the plan is
  // spent. Each is done where the plan recorded it, without reading its path back.
  void ApplyTo(Json& working, Json& patch);

 private:
  // Where an operation goes: a new member `key` of the object at `parent`, or the end of the
  // list at `parent`.
  struct Target {
    JsonPointer parent;
    std::string key;
    bool append = false;
  };
  // A value the plan creates, and where.
  struct Created {
    JsonPointer at;
    std::string at_text;
    Json value;
  };
  void Record(Json op, Target target);
  Created* CreatedContaining(const JsonPointer& at, JsonPointer& relative);
  const Json* Find(const JsonPointer& at) const;

  const Json* base_;
  std::vector<Created> created_;
  // Position in created_ by at_text: a path's containing entry is found by its prefixes, so a
  // plan over thousands of containers stays linear (created entries never nest).
  std::unordered_map<std::string, std::size_t> created_at_;
  std::vector<Json> ops_;
  std::vector<Target> targets_;  // one for each of ops_
};

}  // namespace ncclguard::core
