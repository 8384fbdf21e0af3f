#pragma once

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
  // Adds `value` at `at` (which must not exist), creating missing parent objects.
  void Add(const JsonPointer& at, Json value);
  // Appends `item` to the list at `at`, creating the list and its parents when absent.
  void Append(const JsonPointer& at, Json item);

  const std::vector<Json>& ops() const { return ops_; }
  bool empty() const { return ops_.empty(); }

 private:
  // A value the plan creates, and where.
  struct Created {
    JsonPointer at;
    std::string at_text;
    Json value;
  };
  Created* CreatedContaining(const JsonPointer& at, JsonPointer& relative);
  const Json* Find(const JsonPointer& at) const;

  const Json* base_;
  std::vector<Created> created_;
  std::vector<Json> ops_;
};

}  // namespace ncclguard::core
