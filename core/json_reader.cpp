#include "core/json_reader.h"

#include <locale.h>
#include <array>
#include <charconv>
#include <clocale>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ncclguard::core {
namespace {

// Objects with more keys than this get a hash index while they are read; smaller ones are
// scanned (most Kubernetes objects have a handful of keys).
constexpr std::size_t kIndexFrom = 16;

// An object's members as the vector they are (ordered_map's operator[] looks a key up).
using Members = Json::object_t::Container;
Members& MembersOf(Json& object) { return object.get_ref<Json::object_t&>(); }

// Frees a tree without allocating, to `depth_left` levels (below them the caller's pop_back
// frees the rest nlohmann's way). nlohmann's destructor moves a container's items onto a stack it
// allocates, as large as the container: after a refused allocation (a memory budget spent
// mid-read) that would take as much memory again, and on every review it is slower.
void FreeBelow(Json& value, std::size_t depth_left) noexcept {
  if (depth_left == 0) return;
  if (value.is_array()) {
    auto& items = value.get_ref<Json::array_t&>();
    while (!items.empty()) {
      FreeBelow(items.back(), depth_left - 1);
      items.pop_back();
    }
  } else if (value.is_object()) {
    Members& members = MembersOf(value);
    while (!members.empty()) {
      FreeBelow(members.back().second, depth_left - 1);
      members.pop_back();
    }
  }
}

// The reader's trees nest no deeper than its limit: freed whole, without allocating.
void Dismantle(Json& value) noexcept { FreeBelow(value, std::numeric_limits<std::size_t>::max()); }

// The bytes that end a plain run inside a string: the closing quote, an escape, a control
// character (which must be escaped) and the first byte of a multi-byte UTF-8 sequence (checked).
constexpr std::array<bool, 256> kEndsRun = [] {
  std::array<bool, 256> ends{};
  for (std::size_t c = 0; c < 256; ++c) ends[c] = c < 0x20 || c == '"' || c == '\\' || c >= 0x80;
  return ends;
}();

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// The C locale's numbers ('.' the decimal point), made once; strtod alone follows LC_NUMERIC.
locale_t CNumericLocale() {
  static const locale_t c = newlocale(LC_NUMERIC_MASK, "C", locale_t{});
  return c;
}

// A recursive-descent reader of RFC 8259 JSON into an ordered_json tree, accepting exactly what
// nlohmann's parser accepts (a leading UTF-8 BOM included) and building the same tree: integers
// that fit are number_unsigned (or number_integer when negative), other numbers double.
//
// A container's members are read into scratch vectors shared by every level (members_ for
// objects, items_ for arrays) and moved into a vector of their exact size when it closes: no
// container grows while it is read, and each value is moved twice, never copied. A container's
// value exists outside the scratch vectors only between its last allocation and its slot, where
// nothing throws, so that on any throw (bad JSON, a spent memory budget) everything read so far
// is in scratch or in root_ and is dismantled without allocating.
class Reader {
 public:
  Reader(std::string_view text, std::size_t offset, std::size_t max_depth)
      : begin_(text.data()),
        at_(text.data() + offset),
        end_(text.data() + text.size()),
        max_depth_(max_depth) {}
  ~Reader() {
    for (auto& member : members_) Dismantle(member.second);
    for (auto& item : items_) Dismantle(item);
    Dismantle(root_);
  }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  // Reads one value; with `whole`, nothing but whitespace may follow it.
  Json Read(bool whole) {
    if (end_ - at_ >= 1 && static_cast<unsigned char>(*at_) == 0xEF) {
      if (end_ - at_ < 3 || static_cast<unsigned char>(at_[1]) != 0xBB ||
          static_cast<unsigned char>(at_[2]) != 0xBF) {
        Fail("an invalid byte order mark (a UTF-8 one is EF BB BF)");
      }
      at_ += 3;
    }
    SkipSpace();
    root_ = Value();
    if (whole) {
      SkipSpace();
      if (at_ != end_) Fail("more after the value; expected the end of the text");
    }
    return std::move(root_);
  }

  std::size_t Offset() const { return static_cast<std::size_t>(at_ - begin_); }

  // The items of the top-level object's member `member` go to `on_item` as they are read.
  void StreamList(std::string_view member, const std::function<void(Json&&)>& on_item) {
    stream_member_ = member;
    on_item_ = &on_item;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    std::size_t line = 1;
    std::size_t column = 1;
    for (const char* c = begin_; c < at_ && c < end_; ++c) {
      if (*c == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw JsonReadError(JsonReadError::Kind::Syntax, "not valid JSON: line " +
                                                         std::to_string(line) + ", column " +
                                                         std::to_string(column) + ": " + what);
  }

  void SkipSpace() {
    while (at_ != end_ && (*at_ == ' ' || *at_ == '\n' || *at_ == '\r' || *at_ == '\t')) ++at_;
  }

  // The next character, which must be there.
  char Peek() {
    if (at_ == end_) Fail("unexpected end of input");
    return *at_;
  }

  void Enter() {
    if (depth_ >= max_depth_) {
      throw JsonReadError(JsonReadError::Kind::TooDeep,
                          "nesting deeper than " + std::to_string(max_depth_) + " levels");
    }
    ++depth_;
  }

  Json Value() {
    switch (Peek()) {
      case '{':
        return Object();
      case '[':
        return Array();
      case '"':
        return Json(String());
      case 't':
        Literal("true");
        return true;
      case 'f':
        Literal("false");
        return false;
      case 'n':
        Literal("null");
        return nullptr;
      default:
        if (*at_ == '-' || IsDigit(*at_)) return Number();
        Fail("expected a value (an object, an array, a string, a number, true, false or null)");
    }
  }

  void Literal(std::string_view word) {
    if (static_cast<std::size_t>(end_ - at_) < word.size() ||
        std::string_view(at_, word.size()) != word) {
      Fail("expected the literal " + std::string(word));
    }
    at_ += word.size();
  }

  Json Object() {
    Enter();
    ++at_;
    const std::size_t first = members_.size();
    std::unique_ptr<std::unordered_map<std::string, std::size_t>> index;
    SkipSpace();
    if (Peek() != '}') {
      while (true) {
        if (Peek() != '"') Fail("expected a string (a member's name)");
        std::string name = String();
        SkipSpace();
        if (Peek() != ':') Fail("expected ':' after a member's name");
        ++at_;
        SkipSpace();
        const bool stream =
            on_item_ != nullptr && depth_ == 1 && name == stream_member_ && Peek() == '[';
        const std::size_t slot = Slot(first, std::move(name), index);
        Json value = stream ? StreamItems() : Value();
        members_[slot].second = std::move(value);
        SkipSpace();
        const char next = Peek();
        ++at_;
        if (next == '}') break;
        if (next != ',') {
          --at_;
          Fail("expected ',' or '}' after an object's member");
        }
        SkipSpace();
      }
    } else {
      ++at_;
    }
    Json object = Json::object();
    Members& members = MembersOf(object);
    members.reserve(members_.size() - first);
    for (std::size_t i = first; i < members_.size(); ++i) {
      members.emplace_back(std::move(members_[i].first), std::move(members_[i].second));
    }
    members_.erase(members_.begin() + static_cast<std::ptrdiff_t>(first), members_.end());
    --depth_;
    return object;
  }

  // The scratch slot of the member `name` of the object whose members start at `first`: a new
  // one, or the one it already has (a repeated key keeps its first place and its last value, as
  // kube-apiserver reads it), emptied.
  std::size_t Slot(std::size_t first, std::string name,
                   std::unique_ptr<std::unordered_map<std::string, std::size_t>>& index) {
    const std::size_t count = members_.size() - first;
    if (index == nullptr && count >= kIndexFrom) {
      index = std::make_unique<std::unordered_map<std::string, std::size_t>>();
      index->reserve(count * 2);
      for (std::size_t i = first; i < members_.size(); ++i) index->emplace(members_[i].first, i);
    }
    std::size_t slot = members_.size();
    if (index != nullptr) {
      slot = index->try_emplace(name, slot).first->second;
    } else {
      for (std::size_t i = first; i < members_.size(); ++i) {
        if (members_[i].first == name) {
          slot = i;
          break;
        }
      }
    }
    if (slot == members_.size()) {
      members_.emplace_back(std::move(name), nullptr);
    } else {
      Dismantle(members_[slot].second);
      members_[slot].second = nullptr;
    }
    return slot;
  }

  // Reads an array from its '[' to past its ']', each item into a new slot at the end of items_;
  // `took(slot)` is called with each item in its slot.
  template <typename Took>
  void Items(Took took) {
    Enter();
    ++at_;
    SkipSpace();
    if (Peek() != ']') {
      while (true) {
        const std::size_t slot = items_.size();
        items_.emplace_back();
        Json value = Value();
        items_[slot] = std::move(value);
        took(slot);
        SkipSpace();
        const char next = Peek();
        ++at_;
        if (next == ']') break;
        if (next != ',') {
          --at_;
          Fail("expected ',' or ']' after an array's item");
        }
        SkipSpace();
      }
    } else {
      ++at_;
    }
    --depth_;
  }

  Json Array() {
    const std::size_t first = items_.size();
    Items([](std::size_t) {});
    Json array = Json::array();
    auto& items = array.get_ref<Json::array_t&>();
    items.reserve(items_.size() - first);
    for (std::size_t i = first; i < items_.size(); ++i) items.push_back(std::move(items_[i]));
    items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(first), items_.end());
    return array;
  }

  // An array whose items go to on_item_ as each is read; an empty array is left in its place.
  // The item waits in scratch while on_item_ has it, so that a throw dismantles what it left.
  Json StreamItems() {
    Items([this](std::size_t slot) {
      (*on_item_)(std::move(items_[slot]));
      Dismantle(items_[slot]);
      items_.pop_back();
    });
    return Json::array();
  }

  // A string from its opening quote; at_ ends past its closing quote.
  std::string String() {
    ++at_;
    const char* run = at_;
    while (at_ != end_ && !kEndsRun[static_cast<unsigned char>(*at_)]) ++at_;
    if (at_ != end_ && *at_ == '"') {
      std::string plain(run, at_);
      ++at_;
      return plain;
    }
    std::string text(run, at_);
    while (true) {
      const auto c = static_cast<unsigned char>(Peek());
      if (c == '"') {
        ++at_;
        return text;
      }
      if (c == '\\') {
        Escape(text);
      } else if (c >= 0x80) {
        Utf8(text);
      } else if (c < 0x20) {
        Fail("a control character in a string (it must be escaped)");
      } else {
        run = at_;
        while (at_ != end_ && !kEndsRun[static_cast<unsigned char>(*at_)]) ++at_;
        text.append(run, at_);
      }
    }
  }

  // One well-formed UTF-8 sequence (Unicode's table 3-7: no overlong forms, no surrogates,
  // nothing past U+10FFFF), appended.
  void Utf8(std::string& text) {
    const auto lead = static_cast<unsigned char>(*at_);
    unsigned char low = 0x80;
    unsigned char high = 0xBF;
    std::size_t continuations = 0;
    if (lead >= 0xC2 && lead <= 0xDF) {
      continuations = 1;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      continuations = 2;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      continuations = 3;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    } else {
      Fail("a string is not valid UTF-8");
    }
    const char* start = at_;
    ++at_;
    for (std::size_t i = 0; i < continuations; ++i) {
      const auto c = static_cast<unsigned char>(Peek());
      if (c < low || c > high) Fail("a string is not valid UTF-8");
      low = 0x80;
      high = 0xBF;
      ++at_;
    }
    text.append(start, at_);
  }

  unsigned Hex4() {
    unsigned value = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = Peek();
      unsigned digit = 0;
      if (c >= '0' && c <= '9') {
        digit = static_cast<unsigned>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        digit = static_cast<unsigned>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        digit = static_cast<unsigned>(c - 'A' + 10);
      } else {
        Fail("\\u must be followed by four hexadecimal digits");
      }
      value = value * 16 + digit;
      ++at_;
    }
    return value;
  }

  void Escape(std::string& text) {
    ++at_;
    const char c = Peek();
    ++at_;
    switch (c) {
      case '"':
      case '\\':
      case '/':
        text += c;
        return;
      case 'b':
        text += '\b';
        return;
      case 'f':
        text += '\f';
        return;
      case 'n':
        text += '\n';
        return;
      case 'r':
        text += '\r';
        return;
      case 't':
        text += '\t';
        return;
      case 'u':
        break;
      default:
        --at_;
        Fail("an invalid escape in a string");
    }
    unsigned code = Hex4();
    if (code >= 0xDC00 && code <= 0xDFFF) Fail("a low surrogate \\u escape without a high one");
    if (code >= 0xD800 && code <= 0xDBFF) {
      if (end_ - at_ < 2 || at_[0] != '\\' || at_[1] != 'u') {
        Fail("a high surrogate \\u escape must be followed by a low one");
      }
      at_ += 2;
      const unsigned low = Hex4();
      if (low < 0xDC00 || low > 0xDFFF) {
        Fail("a high surrogate \\u escape must be followed by a low one");
      }
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    }
    if (code < 0x80) {
      text += static_cast<char>(code);
    } else if (code < 0x800) {
      text += static_cast<char>(0xC0 | (code >> 6));
      text += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      text += static_cast<char>(0xE0 | (code >> 12));
      text += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      text += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      text += static_cast<char>(0xF0 | (code >> 18));
      text += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      text += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      text += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  void Digits() {
    if (at_ == end_ || !IsDigit(*at_)) Fail("expected a digit in a number");
    while (at_ != end_ && IsDigit(*at_)) ++at_;
  }

  // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?. An integer is number_unsigned when it fits
  // 64 bits, number_integer when negative and it fits; any other number is a double, and one
  // past a double's range is refused.
  Json Number() {
    const char* start = at_;
    const bool negative = *at_ == '-';
    if (negative) ++at_;
    if (at_ != end_ && *at_ == '0') {
      ++at_;
    } else {
      Digits();
    }
    const char* integer_end = at_;
    bool integral = true;
    if (at_ != end_ && *at_ == '.') {
      integral = false;
      ++at_;
      Digits();
    }
    if (at_ != end_ && (*at_ == 'e' || *at_ == 'E')) {
      integral = false;
      ++at_;
      if (at_ != end_ && (*at_ == '+' || *at_ == '-')) ++at_;
      Digits();
    }
    if (integral) {
      std::uint64_t magnitude = 0;
      bool fits = true;
      for (const char* c = start + (negative ? 1 : 0); c != integer_end; ++c) {
        const auto digit = static_cast<std::uint64_t>(*c - '0');
        if (__builtin_mul_overflow(magnitude, 10, &magnitude) ||
            __builtin_add_overflow(magnitude, digit, &magnitude)) {
          fits = false;
          break;
        }
      }
      if (fits && !negative) return static_cast<Json::number_unsigned_t>(magnitude);
      constexpr std::uint64_t kMostNegative = std::uint64_t{1} << 63;
      if (fits && magnitude <= kMostNegative) {
        return magnitude == kMostNegative ? std::numeric_limits<Json::number_integer_t>::min()
                                          : -static_cast<Json::number_integer_t>(magnitude);
      }
    }
    double value = 0;
    const auto [end, error] = std::from_chars(start, at_, value);
    if (error != std::errc() || end != at_) {
      // Past what from_chars rounds (it refuses an underflow to zero as well as an overflow):
      // strtod's answer, as nlohmann's parser takes it, in the C locale whatever the process's.
      const std::string token(start, at_);
      char* read_to = nullptr;
      const locale_t c = CNumericLocale();  // null only if the C locale could not be made
      value = c != locale_t{} ? strtod_l(token.c_str(), &read_to, c)
                              : std::strtod(token.c_str(), &read_to);
      if (read_to != token.c_str() + token.size()) value = HUGE_VAL;
    }
    if (!std::isfinite(value)) {
      constexpr std::size_t kShown = 64;  // a number can be megabytes long
      const std::string_view token(start, static_cast<std::size_t>(at_ - start));
      throw JsonReadError(JsonReadError::Kind::NumberOutOfRange,
                          "a number is out of range: " + std::string(token.substr(0, kShown)) +
                              (token.size() > kShown ? "..." : ""));
    }
    return value;
  }

  const char* begin_;
  const char* at_;
  const char* end_;
  std::size_t max_depth_;
  std::size_t depth_ = 0;
  std::string_view stream_member_;
  const std::function<void(Json&&)>* on_item_ = nullptr;
  Json root_;
  std::vector<std::pair<std::string, Json>> members_;
  std::vector<Json> items_;
};

}  // namespace

Json ReadJson(std::string_view text, const JsonReadOptions& options) {
  Reader reader(text, 0, options.max_depth);
  return reader.Read(/*whole=*/true);
}

Json ReadJsonValueAt(std::string_view text, std::size_t& offset, const JsonReadOptions& options) {
  Reader reader(text, offset, options.max_depth);
  Json value = reader.Read(/*whole=*/false);
  offset = reader.Offset();
  return value;
}

Json ReadJsonStreamingList(std::string_view text, std::string_view list_member,
                           const std::function<void(Json&& item)>& on_item,
                           const JsonReadOptions& options) {
  Reader reader(text, 0, options.max_depth);
  reader.StreamList(list_member, on_item);
  return reader.Read(/*whole=*/true);
}

void FreeJson(Json& tree) noexcept {
  FreeBelow(tree, kFreeJsonDepth);
  tree = nullptr;
}

}  // namespace ncclguard::core
