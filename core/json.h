#pragma once

#include <nlohmann/json.hpp>

namespace ncclguard::core {

// Ordered so that `ncclguard fix` writes keys back in the order the user wrote them.
using Json = nlohmann::ordered_json;
using JsonPointer = Json::json_pointer;

}  // namespace ncclguard::core
