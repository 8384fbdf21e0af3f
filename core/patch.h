#pragma once

#include <optional>
#include <vector>

#include "core/json.h"

namespace ncclguard::core {

// Builds RFC 6902 "add" operations against an object, creating missing parents, and keeps a copy
// of the object with the operations applied (made on the first operation only, so a compliant
// object costs no copy). Never replaces a value that exists.
class PatchPlan {
 public:
  explicit PatchPlan(const Json& base) : base_(&base) {}

  bool Exists(const JsonPointer& at) const;
  // Adds `value` at `at` (which must not exist), creating missing parent objects.
  void Add(const JsonPointer& at, Json value);
  // Appends `item` to the list at `at`, creating the list and its parents when absent.
  void Append(const JsonPointer& at, Json item);

  // The object as it will be once the operations so far are applied.
  const Json& Current() const { return patched_ ? *patched_ : *base_; }
  const std::vector<Json>& ops() const { return ops_; }
  bool empty() const { return ops_.empty(); }
  // The object with every operation applied.
  Json TakeResult();

 private:
  Json& Patched();

  const Json* base_;
  std::optional<Json> patched_;
  std::vector<Json> ops_;
};

}  // namespace ncclguard::core
