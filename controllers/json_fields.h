#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/json.h"

namespace ncclguard::controllers {

// Lenient reads of cached objects: a missing field, or one of the wrong type, reads as the
// fallback. Status written by other controllers is input we do not own; it must never throw.
std::string StringField(const core::Json& object, std::string_view key,
                        std::string_view fallback = "");
std::int64_t IntField(const core::Json& object, std::string_view key, std::int64_t fallback = 0);
bool BoolField(const core::Json& object, std::string_view key, bool fallback = false);

// `text` cut to at most `max_bytes` with "..." at the end, never inside a UTF-8 sequence (a
// torn sequence makes the JSON unserialisable).
std::string TruncateUtf8(std::string text, std::size_t max_bytes);

}  // namespace ncclguard::controllers
