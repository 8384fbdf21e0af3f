#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/json.h"

namespace ncclguard::core {

// Typed reads at a JSON Pointer. Absent (or null) fields give nullptr / nullopt; a field present
// with the wrong type throws InputError naming the pointer, so bad input never reaches a rule.
const Json* OptionalObject(const Json& root, const JsonPointer& at);
const Json* OptionalArray(const Json& root, const JsonPointer& at);
std::optional<std::string> OptionalString(const Json& root, const JsonPointer& at);
std::optional<std::int64_t> OptionalInteger(const Json& root, const JsonPointer& at);
std::optional<bool> OptionalBool(const Json& root, const JsonPointer& at);

// The same reads one level down from a node already at hand (`node_at` is its pointer, used only
// to name the field in an error): no pointer is built on the happy path.
const Json* ChildObject(const Json& node, std::string_view key, const JsonPointer& node_at);
const Json* ChildArray(const Json& node, std::string_view key, const JsonPointer& node_at);
std::optional<std::string> ChildString(const Json& node, std::string_view key,
                                       const JsonPointer& node_at);
std::optional<bool> ChildBool(const Json& node, std::string_view key, const JsonPointer& node_at);

// The member `key` of `object`: nullptr when `object` is not an object or has no such member.
// Untyped: the caller checks the member's type.
const Json* Member(const Json& object, std::string_view key);

// The value of one of the object's labels (metadata.labels); "" when absent or not a string (the
// API server never stores such labels). The view lives as long as `object`.
std::string_view LabelValue(const Json& object, std::string_view key);

// Makes room in `object` (an object) for one more member. ordered_json's own growth copies every
// member with its whole subtree (a pair with a const key is not nothrow-movable): quadratic in the
// object's size. Here the values move and only the keys are copied; the capacity doubles, as
// std::vector's does. Should a key's copy be refused (a memory budget), the object is left whole.
void ReserveMember(Json& object);

// The same tree, strictly: the same type at every node (nlohmann's == calls 1, 1u and 1.0 equal;
// this keeps number_unsigned, number_integer and number_float apart, and -0.0 from 0.0), the same
// keys in the same order, the same values.
bool SameJsonTree(const Json& a, const Json& b);

// RFC 6901 escaping of one reference token ("~" -> "~0", "/" -> "~1").
std::string EscapePointerToken(std::string_view token);

}  // namespace ncclguard::core
