// JSON text to a Json tree in time linear in the text: ncclguard's own reader, which accepts and
// builds exactly what nlohmann's parser does (tests/unit/json_reader_test.cpp, the json_reader
// fuzz target) at a third to a half of its cost. nlohmann::ordered_json looks a key up by
// scanning its object, so its own parser takes quadratic time on an object with many keys (100k
// labels: a minute of CPU); this reader indexes the keys of large objects while it builds them.
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>

#include "core/errors.h"
#include "core/json.h"

namespace ncclguard::core {

class JsonReadError : public InputError {
 public:
  enum class Kind {
    Syntax,            // not JSON (nlohmann's message: line, column, what was expected)
    NumberOutOfRange,  // 1e999: no double holds it
    TooDeep,           // nesting past the limit
  };
  JsonReadError(Kind kind, const std::string& message) : InputError(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

struct JsonReadOptions {
  // Arrays and objects may nest this deep; refused while reading, before anything deeper is
  // built (copies, dumps and comparisons of a tree recurse).
  std::size_t max_depth = 256;
};

// Reads the one JSON value that `text` holds (whitespace around it allowed). A repeated key
// keeps its first place and its last value, as kube-apiserver reads it. Throws JsonReadError.
Json ReadJson(std::string_view text, const JsonReadOptions& options = {});

// Reads the JSON value that starts at text[offset] (after whitespace) and sets `offset` just
// past it: for concatenated values. Throws JsonReadError.
Json ReadJsonValueAt(std::string_view text, std::size_t& offset,
                     const JsonReadOptions& options = {});

// Reads the JSON value that `text` holds and, when it is an object whose member `list_member` is
// an array, hands each item of that array to `on_item` as soon as the item is read instead of
// keeping it: the value returned has the member as an empty array. A list response of thousands
// of objects never exists as one tree. Throws JsonReadError (after handing on the items read
// before the error), or what `on_item` throws.
Json ReadJsonStreamingList(std::string_view text, std::string_view list_member,
                           const std::function<void(Json&& item)>& on_item,
                           const JsonReadOptions& options = {});

// Frees `tree` (leaving null) without allocating and without nlohmann's destructor, which
// moves every container's items onto a stack it allocates as large as the container (a seventh
// of the webhook's instructions a review went to it; freed this way, 18 K of 1,030 K fewer).
// Recurses as deep as the tree nests, to kFreeJsonDepth levels (past them nlohmann's destructor
// frees what is left); the reader's trees nest at most JsonReadOptions::max_depth.
inline constexpr std::size_t kFreeJsonDepth = 512;
void FreeJson(Json& tree) noexcept;

// FreeJson on a tree when the scope ends: declared after the tree, it runs before the tree's
// own destructor, which then has nothing left to free.
class FreeJsonAtExit {
 public:
  explicit FreeJsonAtExit(Json& tree) : tree_(tree) {}
  ~FreeJsonAtExit() { FreeJson(tree_); }
  FreeJsonAtExit(const FreeJsonAtExit&) = delete;
  FreeJsonAtExit& operator=(const FreeJsonAtExit&) = delete;

 private:
  Json& tree_;
};

}  // namespace ncclguard::core
