#include "core/documents.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/errors.h"
#include "core/json_reader.h"

namespace ncclguard::core {
namespace {

std::string DocumentLabel(std::size_t index) { return "document " + std::to_string(index + 1); }

bool IsOneOf(std::string_view s, std::initializer_list<std::string_view> options) {
  for (std::string_view o : options) {
    if (s == o) return true;
  }
  return false;
}

// Plain-scalar resolution as Kubernetes' YAML reader does it (YAML 1.1 booleans and octal
// included), so lint sees the same types the API server would.
Json ResolvePlain(const std::string& s) {
  if (IsOneOf(s, {"", "~", "null", "Null", "NULL"})) return nullptr;
  if (IsOneOf(s, {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y"}))
    return true;
  if (IsOneOf(s, {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N"})) {
    return false;
  }
  std::string_view body = s;
  bool negative = false;
  if (!body.empty() && (body[0] == '-' || body[0] == '+')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  auto as_integer = [&](std::string_view digits, int base) -> Json {
    if (digits.empty()) return {};
    std::int64_t value = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, base);
    if (ec != std::errc() || ptr != digits.data() + digits.size()) return {};
    return negative ? -value : value;
  };
  if (body.starts_with("0x")) {
    if (Json v = as_integer(body.substr(2), 16); !v.is_null()) return v;
  } else if (body.starts_with("0o")) {
    if (Json v = as_integer(body.substr(2), 8); !v.is_null()) return v;
  } else if (body.size() > 1 && body[0] == '0' &&
             body.find_first_not_of("01234567") == std::string_view::npos) {
    if (Json v = as_integer(body.substr(1), 8); !v.is_null()) return v;
  } else if (!body.empty() && body.find_first_not_of("0123456789") == std::string_view::npos) {
    if (Json v = as_integer(body, 10); !v.is_null()) return v;
  } else if (!body.empty() && body.front() != '_' &&
             body.find_first_not_of("0123456789_") == std::string_view::npos) {
    // YAML 1.1 digit grouping ("1_000"), which Kubernetes' reader accepts.
    std::string digits(body);
    std::erase(digits, '_');
    if (Json v = as_integer(digits, 10); !v.is_null()) return v;
  }
  if (IsOneOf(s, {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"})) {
    return std::numeric_limits<double>::infinity();
  }
  if (IsOneOf(s, {"-.inf", "-.Inf", "-.INF"})) return -std::numeric_limits<double>::infinity();
  if (IsOneOf(s, {".nan", ".NaN", ".NAN"})) return std::numeric_limits<double>::quiet_NaN();
  // A float: digits with a '.' or an exponent and nothing else.
  if (body.find_first_of(".eE") != std::string_view::npos &&
      body.find_first_of("0123456789") != std::string_view::npos &&
      body.find_first_not_of("0123456789.eE+-") == std::string_view::npos) {
    double value = 0;
    auto [ptr, ec] = std::from_chars(body.data(), body.data() + body.size(), value);
    if (ec == std::errc() && ptr == body.data() + body.size()) return negative ? -value : value;
  }
  return s;
}

const std::string& DecodedText(const std::string& scalar, const YAML::Mark& mark,
                               std::string& storage);

Json ScalarToJson(const YAML::Node& node) {
  const std::string& tag = node.Tag();
  std::string storage;
  const std::string& text = DecodedText(node.Scalar(), node.Mark(), storage);
  if (tag == "!" || tag == "tag:yaml.org,2002:str") return text;
  Json resolved = ResolvePlain(text);
  if (tag == "?" || tag.empty()) return resolved;
  if (tag == "tag:yaml.org,2002:int" && resolved.is_number_integer()) return resolved;
  if (tag == "tag:yaml.org,2002:float" && resolved.is_number()) return resolved;
  if (tag == "tag:yaml.org,2002:bool" && resolved.is_boolean()) return resolved;
  if (tag == "tag:yaml.org,2002:null" && resolved.is_null()) return resolved;
  return text;  // other explicit tags: keep the text
}

// The keys of one mapping as it is converted: scanned while few, hashed once many, so a mapping
// with 100k keys converts in linear time (Json's own lookup scans the object).
class SeenKeys {
 public:
  // False when `key` was seen; `members` holds the keys so far, in order.
  bool Insert(const std::string& key, const Json::object_t& members) {
    constexpr std::size_t kHashFrom = 16;
    if (hashed_.empty() && members.size() < kHashFrom) {
      for (const auto& member : members) {
        if (member.first == key) return false;
      }
      return true;
    }
    if (hashed_.empty()) {
      for (const auto& member : members) hashed_.insert(member.first);
    }
    return hashed_.insert(key).second;
  }

 private:
  std::unordered_set<std::string> hashed_;
};

Json NodeToJson(const YAML::Node& node, std::size_t depth) {
  if (depth > kMaxNestingDepth) {
    throw InputError("nesting deeper than " + std::to_string(kMaxNestingDepth) + " levels");
  }
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return nullptr;
    case YAML::NodeType::Scalar:
      return ScalarToJson(node);
    case YAML::NodeType::Sequence: {
      Json array = Json::array();
      for (const YAML::Node& item : node) array.push_back(NodeToJson(item, depth + 1));
      return array;
    }
    case YAML::NodeType::Map: {
      Json object = Json::object();
      auto& members = object.get_ref<Json::object_t&>();
      SeenKeys seen;
      for (const auto& entry : node) {
        if (!entry.first.IsScalar()) {
          throw InputError("line " + std::to_string(entry.first.Mark().line + 1) +
                           ": mapping keys must be plain strings");
        }
        std::string storage;
        const std::string& key = DecodedText(entry.first.Scalar(), entry.first.Mark(), storage);
        if (!seen.Insert(key, members)) {
          // Kubernetes' YAML reader refuses these too; silently keeping one would drop a field.
          throw InputError("line " + std::to_string(entry.first.Mark().line + 1) +
                           ": duplicate key " + Json(key).dump());
        }
        members.emplace_back(key, NodeToJson(entry.second, depth + 1));
      }
      return object;
    }
  }
  return nullptr;
}

const char* TypeWord(const Json& value) {
  if (value.is_array()) return "a list";
  if (value.is_string()) return "a string";
  if (value.is_number()) return "a number";
  if (value.is_boolean()) return "a boolean";
  return "null";
}

void RequireObject(const Json& document, std::size_t index) {
  if (!document.is_object()) {
    throw InputError(DocumentLabel(index) + ": expected a Kubernetes object (a mapping), got " +
                     TypeWord(document));
  }
}

DocumentSet ParseJson(std::string_view text) {
  DocumentSet set;
  set.format = DocumentFormat::JsonStream;
  const auto skip_space = [&](std::size_t at) {
    const std::size_t next = text.find_first_not_of(" \t\r\n", at);
    return next == std::string_view::npos ? text.size() : next;
  };
  std::size_t index = 0;
  for (std::size_t offset = skip_space(0); offset < text.size(); offset = skip_space(offset)) {
    Json value;
    try {
      value = ReadJsonValueAt(text, offset, {.max_depth = kMaxNestingDepth});
    } catch (const JsonReadError& e) {
      if (e.kind() == JsonReadError::Kind::TooDeep) throw InputError(e.what());
      throw InputError(DocumentLabel(index) + ": " + e.what());
    }
    const bool last = skip_space(offset) == text.size();
    if (index == 0 && last && value.is_array()) {
      set.json_array = true;
      for (std::size_t i = 0; i < value.size(); ++i) RequireObject(value[i], i);
      for (auto& item : value) {
        set.documents.push_back(std::move(item));
        set.positions.push_back(set.documents.size());
      }
      return set;
    }
    RequireObject(value, index);
    set.documents.push_back(std::move(value));
    set.positions.push_back(++index);
  }
  return set;
}

// Length of the UTF-8 sequence at text[i], or 0 when it is not well formed (overlong forms,
// surrogates and code points past U+10FFFF included).
std::size_t Utf8SequenceLength(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (std::size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

// A scalar as yaml-cpp decoded it, made UTF-8 again: yaml-cpp 0.7 decodes the escapes "\N"
// (U+0085) and "\_" (U+00A0) to the single bytes 0x85 and 0xA0 (found by fuzz/manifest_fix:
// `fix` wrote them back raw, as text no reader takes); those become their UTF-8 encodings. Any
// other byte that is not UTF-8 after decoding (an escaped surrogate, "\uD800") is an input error.
// Returns `scalar` itself when it is UTF-8 (nearly always), else the repaired text in `storage`.
const std::string& DecodedText(const std::string& scalar, const YAML::Mark& mark,
                               std::string& storage) {
  if (IsUtf8(scalar)) return scalar;
  std::string& text = storage;
  text.reserve(scalar.size() + 8);
  for (std::size_t i = 0; i < scalar.size();) {
    const std::size_t length = Utf8SequenceLength(scalar, i);
    if (length > 0) {
      text.append(scalar, i, length);
      i += length;
      continue;
    }
    const auto byte = static_cast<unsigned char>(scalar[i]);
    if (byte != 0x85 && byte != 0xA0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", byte);
      throw InputError("line " + std::to_string(mark.line + 1) + ", column " +
                       std::to_string(mark.column + 1) + ": an escape gives text that is not " +
                       "UTF-8 (byte " + hex + ")");
    }
    text += '\xC2';
    text += static_cast<char>(byte);
    ++i;
  }
  return storage;
}

// The 0-based document that the line starting at `line_start` belongs to, counting documents
// the way ParseYaml does (empty ones included): "---" starts one unless it is the first thing,
// "..." ends one.
std::size_t DocumentIndexAt(std::string_view text, std::size_t line_start) {
  std::size_t index = 0;
  bool started = false;
  for (std::size_t start = 0; start <= line_start && start < text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    const bool marker_end =
        line.size() == 3 ||
        (line.size() > 3 && (line[3] == ' ' || line[3] == '\t' || line[3] == '\r'));
    if (line.starts_with("---") && marker_end) {
      if (started) ++index;
      started = true;
    } else if (line.starts_with("...") && marker_end) {
      if (started) ++index;
      started = false;
    } else {
      const std::size_t first = line.find_first_not_of(" \t\r");
      if (first != std::string_view::npos && line[first] != '#' && !(!started && line[0] == '%')) {
        started = true;
      }
    }
    start = end + 1;
  }
  return index;
}

// YAML is Unicode text: invalid UTF-8 and raw control characters (other than tab, line feed and
// carriage return) are refused before parsing, naming the document, line and column, rather
// than passed on changed (a writer would turn them into U+FFFD and a fix would rewrite keys).
void RequireYamlText(std::string_view text) {
  std::size_t line = 0;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    std::string problem;
    const std::size_t length = Utf8SequenceLength(text, i);
    if (length == 0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", c);
      problem = std::string("not UTF-8 (byte ") + hex + ")";
    } else if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F) {
      char code[8];
      std::snprintf(code, sizeof code, "U+%04X", c);
      problem = std::string("control character ") + code +
                " (YAML allows tab, line feed and carriage return only; escape it in a "
                "double-quoted string)";
    }
    if (!problem.empty()) {
      throw InputError(DocumentLabel(DocumentIndexAt(text, line_start)) + ": line " +
                       std::to_string(line + 1) + ", column " + std::to_string(i - line_start + 1) +
                       ": " + problem);
    }
    if (c == '\n') {
      ++line;
      line_start = i + 1;
    }
    i += length;
  }
}

// What a document holds once its aliases are expanded: values (scalars, nulls, lists and maps,
// keys included) and scalar bytes.
struct ExpandedSize {
  std::uint64_t values = 0;
  std::uint64_t bytes = 0;
};

// A first pass over the events that keeps no tree: where each document starts, and how large it
// becomes when every alias is replaced by what its anchor holds. An alias repeats its anchor's
// whole subtree, so nested anchors grow a document exponentially (a 352-byte "billion laughs"
// holds 10^9 values): the conversion to Json, which expands them, must never see such a one.
class DocumentScan : public YAML::EventHandler {
 public:
  YAML::Mark last;  // where the current document started
  ExpandedSize size;

  void OnDocumentStart(const YAML::Mark& mark) override {
    last = mark;
    size = {};
    anchors_.clear();
    open_.clear();
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t anchor) override { Leaf(anchor, 0); }
  void OnAlias(const YAML::Mark&, YAML::anchor_t anchor) override {
    const auto it = anchors_.find(anchor);
    if (it == anchors_.end()) return;  // yaml-cpp refuses an unknown alias itself
    Add(it->second);
  }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                const std::string& value) override {
    Leaf(anchor, value.size());
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(anchor);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(anchor);
  }
  void OnMapEnd() override { Close(); }

 private:
  void Add(const ExpandedSize& more) {
    // Each term is at most the limit (a subtree is checked as it grows), so no sum overflows.
    size.values += more.values;
    size.bytes += more.bytes;
    if (size.values > kMaxExpandedValues || size.bytes > kMaxExpandedBytes) {
      throw InputError("larger than " + std::to_string(kMaxExpandedValues) + " values or " +
                       std::to_string(kMaxExpandedBytes >> 20) + " MiB of text once its " +
                       "aliases are expanded (YAML anchors repeated by aliases)");
    }
  }
  void Leaf(YAML::anchor_t anchor, std::size_t bytes) {
    const ExpandedSize leaf{1, bytes};
    Add(leaf);
    if (anchor != YAML::NullAnchor) anchors_[anchor] = leaf;
  }
  void Open(YAML::anchor_t anchor) {
    Add({1, 0});
    open_.push_back({anchor, {size.values - 1, size.bytes}});
  }
  void Close() {
    if (open_.empty()) return;
    const auto [anchor, before] = open_.back();
    open_.pop_back();
    if (anchor != YAML::NullAnchor) {
      anchors_[anchor] = {size.values - before.values, size.bytes - before.bytes};
    }
  }

  std::unordered_map<YAML::anchor_t, ExpandedSize> anchors_;
  std::vector<std::pair<YAML::anchor_t, ExpandedSize>> open_;
};

// One pass of DocumentScan over the whole stream, before anything is loaded:
// - yaml-cpp 0.7 stops advancing on some malformed input (`"",` is one) and reports empty
//   documents forever, which YAML::LoadAll collects until memory runs out (found by
//   fuzz/manifest_fix). A document after the first needs a marker of at least 3 bytes, so more
//   documents than that is this loop.
// - a document that aliases expand past the limits is refused, naming it.
void ScanDocuments(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentScan scan;
  const std::size_t max_documents = text.size() / 3 + 2;
  std::size_t documents = 0;
  try {
    while (parser.HandleNextDocument(scan)) {
      if (++documents > max_documents) {
        throw InputError("not valid YAML: line " + std::to_string(scan.last.line + 1) +
                         ", column " + std::to_string(scan.last.column + 1) +
                         ": no document can be read from here");
      }
    }
  } catch (const InputError& e) {
    if (documents > max_documents) throw;
    throw InputError(DocumentLabel(documents) + ": " + e.what());  // the one being read
  }
}

DocumentSet ParseYaml(std::string_view text) {
  RequireYamlText(text);
  DocumentSet set;
  std::vector<YAML::Node> nodes;
  try {
    const std::string owned(text);
    ScanDocuments(owned);
    nodes = YAML::LoadAll(owned);
  } catch (const YAML::ParserException& e) {
    if (std::string_view(e.msg).find("bad file") != std::string_view::npos || e.msg.empty()) {
      throw InputError("line " + std::to_string(e.mark.line + 1) +
                       ": nesting too deep or unreadable YAML");
    }
    throw InputError("not valid YAML: line " + std::to_string(e.mark.line + 1) + ", column " +
                     std::to_string(e.mark.column + 1) + ": " + e.msg);
  } catch (const YAML::Exception& e) {
    throw InputError(std::string("not valid YAML: ") + e.what());
  }
  std::size_t index = 0;
  for (const YAML::Node& node : nodes) {
    if (node.IsNull()) {
      ++index;
      continue;
    }
    Json document;
    try {
      document = NodeToJson(node, 0);
    } catch (const InputError& e) {
      throw InputError(DocumentLabel(index) + ": " + e.what());
    }
    RequireObject(document, index);
    set.documents.push_back(std::move(document));
    set.positions.push_back(++index);
  }
  return set;
}

// A string YAML reads back unchanged when written plain (no quotes) in block context.
bool IsPlainSafe(const std::string& s) {
  if (s.empty() || !ResolvePlain(s).is_string()) return false;
  constexpr std::string_view kIndicators = "?:,[]{}#&*!|>'\"%@`";
  const char first = s.front();
  if (kIndicators.find(first) != std::string_view::npos || first == ' ') return false;
  if (first == '-' && (s.size() == 1 || s[1] == ' ' || s.starts_with("---"))) return false;
  // At the start of a line "..." ends the document (found by fuzz/manifest_fix: a key "...x").
  if (s.starts_with("...")) return false;
  if (s.back() == ' ' || s.back() == ':') return false;
  if (s.find(": ") != std::string::npos || s.find(" #") != std::string::npos) return false;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

// Multi-line text that a literal block ("|") keeps byte for byte.
bool FitsLiteralBlock(const std::string& s) {
  if (s.size() < 2 || s.back() != '\n' || s[s.size() - 2] == '\n' || s.front() == ' ') return false;
  for (unsigned char c : s) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f || c == '\r') return false;
  }
  return true;
}

void WriteQuoted(std::string& out, const std::string& s) {
  out += Json(s).dump(-1, ' ', false, Json::error_handler_t::replace);
}

// A scalar (or empty container) at the end of a line; `indent` is where a literal block's lines go.
void WriteInline(std::string& out, const Json& value, std::size_t indent) {
  switch (value.type()) {
    case Json::value_t::object:
      out += "{}";
      break;
    case Json::value_t::array:
      out += "[]";
      break;
    case Json::value_t::string: {
      const auto& s = value.get_ref<const std::string&>();
      if (IsPlainSafe(s)) {
        out += s;
      } else if (FitsLiteralBlock(s)) {
        out += "|";
        std::size_t start = 0;
        while (start < s.size()) {
          const std::size_t end = s.find('\n', start);
          out += '\n';
          if (end > start) out.append(indent, ' ').append(s, start, end - start);
          start = end + 1;
        }
        out += '\n';
        return;
      } else {
        WriteQuoted(out, s);
      }
      break;
    }
    case Json::value_t::boolean:
      out += value.get<bool>() ? "true" : "false";
      break;
    case Json::value_t::number_float: {
      const double d = value.get<double>();
      out += std::isnan(d) ? ".nan" : std::isinf(d) ? (d > 0 ? ".inf" : "-.inf") : value.dump();
      break;
    }
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      out += value.dump();
      break;
    default:
      out += "null";
  }
  out += '\n';
}

bool IsNonEmptyContainer(const Json& value) {
  return (value.is_object() || value.is_array()) && !value.empty();
}

void WriteBlock(std::string& out, const Json& value, std::size_t indent, bool continues_line);

// YAML allows an implicit key ("key: value") of at most 1024 characters; a longer one is written
// as an explicit key ("? key" and ": value" on the next line, at the mapping's indent).
constexpr std::size_t kMaxImplicitKey = 1000;  // bytes: at most as many characters

void WriteKey(std::string& out, const std::string& key, std::size_t indent) {
  std::string text;
  if (IsPlainSafe(key)) {
    text = key;
  } else {
    WriteQuoted(text, key);
  }
  if (text.size() <= kMaxImplicitKey) {
    out += text;
  } else {
    out += "? ";
    out += text;
    out += '\n';
    out.append(indent, ' ');
  }
  out += ':';
}

// Writes a non-empty map or list at `indent`. With `continues_line` the first line follows a
// "- " already written, so it is not indented again.
void WriteBlock(std::string& out, const Json& value, std::size_t indent, bool continues_line) {
  bool first = true;
  auto line_start = [&] {
    if (!(first && continues_line)) out.append(indent, ' ');
    first = false;
  };
  if (value.is_object()) {
    for (const auto& [key, item] : value.items()) {
      line_start();
      WriteKey(out, key, indent);
      if (IsNonEmptyContainer(item)) {
        out += '\n';
        WriteBlock(out, item, indent + 2, false);
      } else {
        out += ' ';
        WriteInline(out, item, indent + 2);
      }
    }
    return;
  }
  for (const Json& item : value) {
    line_start();
    if (item.is_object() && !item.empty()) {
      out += "- ";
      WriteBlock(out, item, indent + 2, true);
    } else if (item.is_array() && !item.empty()) {
      out += "-\n";
      WriteBlock(out, item, indent + 2, false);
    } else {
      out += "- ";
      WriteInline(out, item, indent + 2);
    }
  }
}

}  // namespace

DocumentSet ParseDocuments(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && (text[first] == '{' || text[first] == '[')) {
    return ParseJson(text);
  }
  return ParseYaml(text);
}

std::string ToYaml(const Json& value) {
  std::string out;
  if (IsNonEmptyContainer(value)) {
    WriteBlock(out, value, 0, false);
  } else {
    WriteInline(out, value, 2);
  }
  return out;
}

std::string WriteDocuments(const DocumentSet& set) {
  std::string out;
  if (set.format == DocumentFormat::JsonStream) {
    const auto dump = [](const Json& j) {
      return j.dump(2, ' ', false, Json::error_handler_t::replace);
    };
    if (set.json_array) {
      Json array = Json::array();
      for (const Json& doc : set.documents) array.push_back(doc);
      return dump(array) + "\n";
    }
    for (const Json& doc : set.documents) out += dump(doc) + "\n";
    return out;
  }
  for (std::size_t i = 0; i < set.documents.size(); ++i) {
    if (i > 0) out += "---\n";
    out += ToYaml(set.documents[i]);
  }
  return out;
}

bool IsUtf8(std::string_view text) {
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t length = Utf8SequenceLength(text, at);
    if (length == 0) return false;
    at += length;
  }
  return true;
}

}  // namespace ncclguard::core
