#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "core/object_ref.h"

namespace ncclguard::core {

// What a rule does about a violation: fix it (mutating path), deny the object, or warn.
enum class Level { Fix, Deny, Warn };

std::string_view LevelName(Level level);
std::optional<Level> ParseLevel(std::string_view name);

struct Finding {
  std::string rule;
  Level level = Level::Warn;
  std::string guide;  // full link
  std::string message;
  ObjectRef object;
  std::string path;  // JSON Pointer into the input object
};

Json ToJson(const Finding& finding);

}  // namespace ncclguard::core
