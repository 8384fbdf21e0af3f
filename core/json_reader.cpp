#include "core/json_reader.h"

#include "core/json_access.h"

#include <exception>
#include <iterator>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ncclguard::core {
namespace {

// Objects with more keys than this get a hash index while they are built; smaller ones are
// scanned (most Kubernetes objects have a handful of keys).
constexpr std::size_t kIndexFrom = 16;

// An object's members as the vector they are (ordered_map's operator[] looks up a key).
using Members = Json::object_t::Container;
Members& MembersOf(Json& object) { return object.get_ref<Json::object_t&>(); }

// Frees a tree without allocating. nlohmann's destructor moves a container's items onto a stack
// it allocates, as large as the container: after a refused allocation (a memory budget spent
// mid-parse) that would take as much memory again. Recurses as deep as the tree nests, which the
// reader bounds.
void Dismantle(Json& value) noexcept {
  if (value.is_array()) {
    auto& items = value.get_ref<Json::array_t&>();
    while (!items.empty()) {
      Dismantle(items.back());
      items.pop_back();
    }
  } else if (value.is_object()) {
    Members& members = MembersOf(value);
    while (!members.empty()) {
      Dismantle(members.back().second);
      members.pop_back();
    }
  }
}

// Builds the tree from nlohmann's SAX events. A container is linked into its parent before its
// members arrive; the parent cannot grow (and move it) until the container is closed.
class TreeBuilder {
 public:
  explicit TreeBuilder(std::size_t max_depth) : max_depth_(max_depth) {}
  ~TreeBuilder() {
    if (std::uncaught_exceptions() > 0) Dismantle(root_);
  }
  TreeBuilder(const TreeBuilder&) = delete;
  TreeBuilder& operator=(const TreeBuilder&) = delete;

  Json Take() { return std::move(root_); }

  bool null() { return Place(nullptr); }
  bool boolean(bool value) { return Place(value); }
  bool number_integer(Json::number_integer_t value) { return Place(value); }
  bool number_unsigned(Json::number_unsigned_t value) { return Place(value); }
  bool number_float(Json::number_float_t value, const std::string&) { return Place(value); }
  bool string(std::string& value) { return Place(std::move(value)); }
  bool binary(Json::binary_t& value) { return Place(Json::binary(std::move(value))); }

  bool start_object(std::size_t) { return Open(Json::object()); }
  bool start_array(std::size_t) { return Open(Json::array()); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }

  bool key(std::string& name) {
    Frame& frame = stack_.back();
    Members& members = MembersOf(*frame.container);
    if (frame.index == nullptr && members.size() >= kIndexFrom) {
      frame.index = std::make_unique<std::unordered_map<std::string, std::size_t>>();
      frame.index->reserve(members.size() * 2);
      for (std::size_t i = 0; i < members.size(); ++i) frame.index->emplace(members[i].first, i);
    }
    std::size_t at = members.size();
    if (frame.index != nullptr) {
      auto [found, inserted] = frame.index->try_emplace(name, at);
      at = found->second;
    } else {
      for (std::size_t i = 0; i < members.size(); ++i) {
        if (members[i].first == name) {
          at = i;
          break;
        }
      }
    }
    if (at == members.size()) {
      ReserveMember(*frame.container);
      members.emplace_back(std::move(name), nullptr);
    }
    frame.member = at;
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error) {
    // nlohmann reports a number past a double's range as out_of_range 406.
    const bool range = error.id == 406;
    throw JsonReadError(range ? JsonReadError::Kind::NumberOutOfRange : JsonReadError::Kind::Syntax,
                        range ? std::string("a number is out of range: ") + error.what()
                              : std::string("not valid JSON: ") + error.what());
  }

 private:
  struct Frame {
    Json* container;
    std::size_t member = 0;  // objects: the member the next value fills
    std::unique_ptr<std::unordered_map<std::string, std::size_t>> index;
  };

  Json* Slot() {
    if (stack_.empty()) return &root_;
    Frame& frame = stack_.back();
    if (frame.container->is_array()) {
      auto& items = frame.container->get_ref<Json::array_t&>();
      items.emplace_back();
      return &items.back();
    }
    return &MembersOf(*frame.container)[frame.member].second;
  }

  bool Place(Json value) {
    *Slot() = std::move(value);
    return true;
  }

  bool Open(Json container) {
    if (stack_.size() >= max_depth_) {
      throw JsonReadError(JsonReadError::Kind::TooDeep,
                          "nesting deeper than " + std::to_string(max_depth_) + " levels");
    }
    Json* slot = Slot();
    *slot = std::move(container);
    stack_.push_back({slot, 0, nullptr});
    return true;
  }

  bool Close() {
    stack_.pop_back();
    return true;
  }

  std::size_t max_depth_;
  Json root_;
  std::vector<Frame> stack_;
};

// A character iterator that records how far the parser has read, so that the next of several
// concatenated values is read from there.
class TrackedChar {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackedChar(const char* at, const char** reached) : at_(at), reached_(reached) {}
  reference operator*() const { return *at_; }
  TrackedChar& operator++() {
    *reached_ = ++at_;
    return *this;
  }
  TrackedChar operator++(int) {
    TrackedChar before = *this;
    ++*this;
    return before;
  }
  bool operator==(const TrackedChar& other) const { return at_ == other.at_; }

 private:
  const char* at_;
  const char** reached_;
};

}  // namespace

Json ReadJson(std::string_view text, const JsonReadOptions& options) {
  TreeBuilder builder(options.max_depth);
  Json::sax_parse(text.begin(), text.end(), &builder);
  return builder.Take();
}

Json ReadJsonValueAt(std::string_view text, std::size_t& offset, const JsonReadOptions& options) {
  TreeBuilder builder(options.max_depth);
  const char* reached = text.data() + offset;
  Json::sax_parse(TrackedChar(text.data() + offset, &reached),
                  TrackedChar(text.data() + text.size(), &reached), &builder,
                  Json::input_format_t::json, /*strict=*/false);
  offset = static_cast<std::size_t>(reached - text.data());
  return builder.Take();
}

}  // namespace ncclguard::core
