#include "core/json_access.h"

#include <cmath>
#include <vector>

#include "core/errors.h"

namespace ncclguard::core {
namespace {

// Splits an RFC 6901 pointer into unescaped reference tokens.
std::vector<std::string> Tokens(const std::string& text) {
  std::vector<std::string> tokens;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t next = text.find('/', pos + 1);
    const std::size_t end = next == std::string::npos ? text.size() : next;
    std::string token;
    for (std::size_t i = pos + 1; i < end; ++i) {
      if (text[i] == '~' && i + 1 < end) {
        token += text[i + 1] == '1' ? '/' : '~';
        ++i;
      } else {
        token += text[i];
      }
    }
    tokens.push_back(std::move(token));
    pos = end;
  }
  return tokens;
}

bool IsIndex(const std::string& token) {
  return !token.empty() && token.size() <= 9 &&
         token.find_first_not_of("0123456789") == std::string::npos;
}

// Walks token by token to name the field that had the wrong type; only used off the fast path.
const Json* SlowLookup(const Json& root, const JsonPointer& at) {
  const Json* node = &root;
  std::string walked;
  for (const std::string& token : Tokens(at.to_string())) {
    if (node->is_object()) {
      auto it = node->find(token);
      if (it == node->end()) return nullptr;
      node = &*it;
    } else if (node->is_array()) {
      if (!IsIndex(token)) {
        // A field asked of a list: the input has a list where an object belongs.
        throw InputError((walked.empty() ? std::string("/") : walked) +
                         ": expected an object, got array");
      }
      const std::size_t index = std::stoul(token);
      if (index >= node->size()) return nullptr;
      node = &(*node)[index];
    } else if (node->is_null()) {
      return nullptr;
    } else {
      throw InputError((walked.empty() ? std::string("/") : walked) +
                       ": expected an object or list, got " + node->type_name());
    }
    // Two appends, not "/" + token: GCC 12 at -O3 inlines that insert and warns of an overlap
    // that cannot happen (-Wrestrict, a known false positive).
    walked += '/';
    walked += EscapePointerToken(token);
  }
  return node->is_null() ? nullptr : node;
}

const Json* Lookup(const Json& root, const JsonPointer& at) {
  // Fast path without allocation: json::contains() is false both for an absent field and for a
  // pointer that runs through a scalar; only the first parent decides which.
  if (root.contains(at)) {
    const Json& node = root.at(at);
    return node.is_null() ? nullptr : &node;
  }
  if (at.empty()) return nullptr;
  const JsonPointer parent = at.parent_pointer();
  if (root.contains(parent)) {
    const Json& node = root.at(parent);
    if (node.is_object() || node.is_null()) return nullptr;
    if (node.is_array() && IsIndex(at.back())) return nullptr;  // an index past the end
  }
  return SlowLookup(root, at);
}

[[noreturn]] void WrongType(const JsonPointer& at, const char* expected, const Json& got) {
  throw InputError(at.to_string() + ": expected " + expected + ", got " + got.type_name());
}

}  // namespace

const Json* OptionalObject(const Json& root, const JsonPointer& at) {
  const Json* node = Lookup(root, at);
  if (node != nullptr && !node->is_object()) WrongType(at, "an object", *node);
  return node;
}

const Json* OptionalArray(const Json& root, const JsonPointer& at) {
  const Json* node = Lookup(root, at);
  if (node != nullptr && !node->is_array()) WrongType(at, "a list", *node);
  return node;
}

std::optional<std::string> OptionalString(const Json& root, const JsonPointer& at) {
  const Json* node = Lookup(root, at);
  if (node == nullptr) return std::nullopt;
  if (!node->is_string()) WrongType(at, "a string", *node);
  return node->get<std::string>();
}

std::optional<std::int64_t> OptionalInteger(const Json& root, const JsonPointer& at) {
  const Json* node = Lookup(root, at);
  if (node == nullptr) return std::nullopt;
  if (!node->is_number_integer()) WrongType(at, "an integer", *node);
  return node->get<std::int64_t>();
}

std::optional<bool> OptionalBool(const Json& root, const JsonPointer& at) {
  const Json* node = Lookup(root, at);
  if (node == nullptr) return std::nullopt;
  if (!node->is_boolean()) WrongType(at, "true or false", *node);
  return node->get<bool>();
}

namespace {
const Json* Child(const Json& node, std::string_view key) {
  if (!node.is_object()) return nullptr;
  const auto it = node.find(key);
  return it == node.end() || it->is_null() ? nullptr : &*it;
}
}  // namespace

const Json* ChildObject(const Json& node, std::string_view key, const JsonPointer& node_at) {
  const Json* child = Child(node, key);
  if (child != nullptr && !child->is_object())
    WrongType(node_at / std::string(key), "an object", *child);
  return child;
}

const Json* ChildArray(const Json& node, std::string_view key, const JsonPointer& node_at) {
  const Json* child = Child(node, key);
  if (child != nullptr && !child->is_array())
    WrongType(node_at / std::string(key), "a list", *child);
  return child;
}

std::optional<std::string> ChildString(const Json& node, std::string_view key,
                                       const JsonPointer& node_at) {
  const Json* child = Child(node, key);
  if (child == nullptr) return std::nullopt;
  if (!child->is_string()) WrongType(node_at / std::string(key), "a string", *child);
  return child->get<std::string>();
}

std::optional<bool> ChildBool(const Json& node, std::string_view key, const JsonPointer& node_at) {
  const Json* child = Child(node, key);
  if (child == nullptr) return std::nullopt;
  if (!child->is_boolean()) WrongType(node_at / std::string(key), "true or false", *child);
  return child->get<bool>();
}

void ReserveMember(Json& object) {
  auto& members = static_cast<Json::object_t::Container&>(object.get_ref<Json::object_t&>());
  if (members.size() < members.capacity()) return;
  Json::object_t::Container grown;
  grown.reserve(members.empty() ? 1 : 2 * members.size());
  try {
    for (auto& [name, value] : members) grown.emplace_back(name, std::move(value));
  } catch (...) {
    for (std::size_t i = 0; i < grown.size(); ++i) members[i].second = std::move(grown[i].second);
    throw;
  }
  members.swap(grown);
}

std::string EscapePointerToken(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

const Json* Member(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  const auto found = object.find(key);
  return found == object.end() ? nullptr : &*found;
}

std::string_view LabelValue(const Json& object, std::string_view key) {
  if (!object.is_object()) return {};
  const auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return {};
  const auto labels = metadata->find("labels");
  if (labels == metadata->end() || !labels->is_object()) return {};
  const auto value = labels->find(std::string(key));
  return value != labels->end() && value->is_string()
             ? std::string_view(value->get_ref<const std::string&>())
             : std::string_view{};
}

bool SameJsonTree(const Json& a, const Json& b) {
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j) {
      if (i.key() != j.key() || !SameJsonTree(i.value(), j.value())) return false;
    }
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!SameJsonTree(a[i], b[i])) return false;
    }
    return true;
  }
  if (a.is_number_float()) {
    return std::signbit(a.get<double>()) == std::signbit(b.get<double>()) &&
           a.get<double>() == b.get<double>();
  }
  return a == b;
}

}  // namespace ncclguard::core
