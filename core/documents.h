#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"

namespace ncclguard::core {

enum class DocumentFormat { YamlStream, JsonStream };

// The documents of one input (a file or stdin) and how they were written, so that they can be
// written back in the same form.
struct DocumentSet {
  DocumentFormat format = DocumentFormat::YamlStream;
  bool json_array = false;  // JSON input was one array of objects
  std::vector<Json> documents;
  std::vector<std::size_t> positions;  // 1-based document number of each, counting empty ones
};

inline constexpr std::size_t kMaxNestingDepth = 256;
// A YAML document may hold this much once its aliases are expanded (values, keys included, and
// bytes of scalar text): Kubernetes objects are far smaller (etcd keeps 1.5 MiB), and a few
// nested anchors can otherwise stand for billions of values.
inline constexpr std::uint64_t kMaxExpandedValues = std::uint64_t{1} << 20;
inline constexpr std::uint64_t kMaxExpandedBytes = std::uint64_t{32} << 20;

// Parses multi-document YAML, a JSON object, a JSON array of objects, or concatenated JSON
// objects. Empty YAML documents are skipped. Throws InputError naming the document (1-based)
// for text that is not YAML/JSON, a document that is not an object, nesting deeper than
// kMaxNestingDepth, a YAML document past kMaxExpandedValues or kMaxExpandedBytes once its
// aliases are expanded, YAML that is not UTF-8 or holds a raw control character (line and column
// named), a duplicate key in a YAML mapping, or a JSON number beyond a double's range.
// docs/limits.md states the rest (numbers beyond int64, JSON duplicate keys).
DocumentSet ParseDocuments(std::string_view text);

// Writes documents in the set's format: YAML separated by "---", or indented JSON.
std::string WriteDocuments(const DocumentSet& set);

// One document as YAML (no leading "---"). Strings that YAML would read back as another type
// ("true", "8", "") are quoted, so a round trip keeps every value's type.
std::string ToYaml(const Json& value);

// True when `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF): what the manifest reader requires of YAML text.
bool IsUtf8(std::string_view text);

}  // namespace ncclguard::core
