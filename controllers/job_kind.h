#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/json.h"
#include "core/kinds.h"

namespace ncclguard::controllers {

using core::Json;
using core::JsonPointer;

// A work-queue key: "<Kind>/<namespace>/<name>", e.g. "PyTorchJob/team-a/llama". The kinds are
// core::ManagedKinds() (core/kinds.h).
struct JobKey {
  core::WorkloadKind kind;
  std::string namespace_;
  std::string name;

  std::string ToString() const;
  // nullopt for a string that is not a key of a managed kind.
  static std::optional<JobKey> Parse(std::string_view text);
  bool operator==(const JobKey&) const = default;
};

}  // namespace ncclguard::controllers
