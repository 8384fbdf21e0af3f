// A Json tree to compact JSON text: byte for byte what Json::dump() writes (tests/unit/
// json_writer_test.cpp, and the json_reader fuzz target writes every tree it reads), at a third of
// its cost where it matters: the webhook's patch, every log line's fields. Plain ASCII strings
// and integers are written here; a string with a byte past ASCII, a double, and anything rarer
// are written by nlohmann's serializer, so what it does with them (UTF-8 checked, shortest
// round-trip doubles) stays exactly its own.
#pragma once

#include <string>
#include <string_view>

#include "core/json.h"

namespace ncclguard::core {

// What a string that is not valid UTF-8 becomes, as nlohmann's error_handler_t says it.
enum class InvalidUtf8 {
  Throw,    // Json::type_error (316), as Json::dump() does: what we send must be valid
  Replace,  // each bad sequence becomes U+FFFD: messages and logs that quote user input
};

// Appends `value` to `out`. When it throws (InvalidUtf8::Throw), `out` may hold part of the value.
void AppendJson(std::string& out, const Json& value, InvalidUtf8 invalid = InvalidUtf8::Throw);
std::string WriteJson(const Json& value, InvalidUtf8 invalid = InvalidUtf8::Throw);
// Appends `text` as a JSON string.
void AppendJsonString(std::string& out, std::string_view text,
                      InvalidUtf8 invalid = InvalidUtf8::Throw);

}  // namespace ncclguard::core
