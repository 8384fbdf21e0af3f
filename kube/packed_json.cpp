#include "kube/packed_json.h"

#include <bit>
#include <functional>
#include <limits>
#include <stdexcept>
#include <utility>

namespace ncclguard::kube {
namespace {

using core::Json;

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

// One byte before each value says what follows. A string, value or key, is a varint k: k odd,
// dictionary entry k >> 1; k even, k >> 1 bytes follow.
enum Tag : std::uint8_t {
  kNull = 0,
  kFalse = 1,
  kTrue = 2,
  kUnsigned = 3,  // varint
  kInteger = 4,   // zigzag varint
  kFloat = 5,     // 8 bytes, little-endian IEEE 754
  kString = 6,    // a string
  kArray = 7,     // varint count, values
  kObject = 8,    // varint count, (key string, value) pairs
  kBinary = 9,    // varint length, bytes (a Json binary's subtype is not kept)
};

void PutVarint(std::uint64_t value, std::vector<std::uint8_t>& out) {
  while (value >= 0x80) {
    out.push_back(static_cast<std::uint8_t>(value | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<std::uint8_t>(value));
}

class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}

  bool AtEnd() const { return at_ == bytes_.size(); }

  std::uint8_t Byte() {
    if (at_ >= bytes_.size()) Fail("truncated");
    return bytes_[at_++];
  }

  std::uint64_t Varint() {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const std::uint8_t byte = Byte();
      value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    Fail("a number longer than 64 bits");
  }

  // A count of things each at least one byte long: never more than the bytes left.
  std::size_t Count() {
    const std::uint64_t count = Varint();
    if (count > bytes_.size() - at_) Fail("a count past the end");
    return static_cast<std::size_t>(count);
  }

  std::string_view Bytes(std::uint64_t length) {
    if (length > bytes_.size() - at_) Fail("a string past the end");
    const auto* start = reinterpret_cast<const char*>(bytes_.data() + at_);
    at_ += static_cast<std::size_t>(length);
    return {start, static_cast<std::size_t>(length)};
  }

  [[noreturn]] void Fail(const char* what) const {
    throw std::runtime_error("unpacking a cached object at byte " + std::to_string(at_) + ": " +
                             what);
  }

 private:
  std::span<const std::uint8_t> bytes_;
  std::size_t at_ = 0;
};

// A string: `string(id, bytes)` is told an entry's id, or kNone and the bytes written in full, and
// returns the text it stands for.
template <typename OnString>
std::string_view ReadString(Reader& in, const OnString& string) {
  const std::uint64_t ref = in.Varint();
  if ((ref & 1) != 0) {
    if ((ref >> 1) >= kNone) in.Fail("an unknown dictionary entry");
    return string(static_cast<std::uint32_t>(ref >> 1), std::string_view());
  }
  return string(kNone, in.Bytes(ref >> 1));
}

std::uint64_t Hash(std::string_view text) { return std::hash<std::string_view>{}(text); }

}  // namespace

class PackedJson::Packer {
 public:
  Packer(PackedJson& dictionary, std::string_view owner)
      : dictionary_(dictionary), owner_(Hash(owner) | 1) {}

  // On an error, the entries taken so far are given back: nothing stored refers to them.
  ~Packer() {
    if (!done_) {
      for (const std::uint32_t id : taken_) dictionary_.Drop(id);
    }
  }

  std::vector<std::uint8_t> Finish(const Json& value) {
    out_.reserve(256);
    Value(value, 0);
    out_.shrink_to_fit();
    done_ = true;
    return std::move(out_);
  }

 private:
  void String(const std::string& text, bool key) {
    const std::uint32_t id = dictionary_.Take(text, key, owner_);
    if (id != kNone) {
      taken_.push_back(id);
      PutVarint((static_cast<std::uint64_t>(id) << 1) | 1, out_);
      return;
    }
    PutVarint(static_cast<std::uint64_t>(text.size()) << 1, out_);
    out_.insert(out_.end(), text.begin(), text.end());
  }

  void Value(const Json& value, int depth) {
    if (depth > kMaxDepth) throw std::runtime_error("packing a cached object: nested too deeply");
    switch (value.type()) {
      case Json::value_t::null:
      case Json::value_t::discarded:
        out_.push_back(kNull);
        return;
      case Json::value_t::boolean:
        out_.push_back(value.get<bool>() ? kTrue : kFalse);
        return;
      case Json::value_t::number_unsigned:
        out_.push_back(kUnsigned);
        PutVarint(value.get<Json::number_unsigned_t>(), out_);
        return;
      case Json::value_t::number_integer: {
        const auto signed_value = value.get<Json::number_integer_t>();
        out_.push_back(kInteger);
        PutVarint((static_cast<std::uint64_t>(signed_value) << 1) ^
                      static_cast<std::uint64_t>(signed_value >> 63),
                  out_);
        return;
      }
      case Json::value_t::number_float: {
        out_.push_back(kFloat);
        const auto bits = std::bit_cast<std::uint64_t>(value.get<double>());
        for (int i = 0; i < 8; ++i) out_.push_back(static_cast<std::uint8_t>(bits >> (8 * i)));
        return;
      }
      case Json::value_t::string:
        out_.push_back(kString);
        String(value.get_ref<const std::string&>(), false);
        return;
      case Json::value_t::array:
        out_.push_back(kArray);
        PutVarint(value.size(), out_);
        for (const Json& item : value) Value(item, depth + 1);
        return;
      case Json::value_t::object:
        out_.push_back(kObject);
        PutVarint(value.size(), out_);
        for (const auto& [key, item] : value.get_ref<const Json::object_t&>()) {
          String(key, true);
          Value(item, depth + 1);
        }
        return;
      case Json::value_t::binary: {
        const auto& binary = value.get_binary();
        out_.push_back(kBinary);
        PutVarint(binary.size(), out_);
        out_.insert(out_.end(), binary.begin(), binary.end());
        return;
      }
    }
  }

  PackedJson& dictionary_;
  std::uint64_t owner_;
  std::vector<std::uint8_t> out_;
  std::vector<std::uint32_t> taken_;
  bool done_ = false;
};

namespace {

// One packed value, read through: built when `build` (Unpack), only walked for its strings
// otherwise (Release).
template <typename OnString>
Json UnpackValue(Reader& in, const OnString& string, int depth, bool build) {
  if (depth > PackedJson::kMaxDepth) in.Fail("nested too deeply");
  switch (in.Byte()) {
    case kNull:
      return nullptr;
    case kFalse:
      return false;
    case kTrue:
      return true;
    case kUnsigned:
      return Json(static_cast<Json::number_unsigned_t>(in.Varint()));
    case kInteger: {
      const std::uint64_t zigzag = in.Varint();
      const auto value =
          static_cast<std::int64_t>(zigzag >> 1) ^ -static_cast<std::int64_t>(zigzag & 1);
      return Json(static_cast<Json::number_integer_t>(value));
    }
    case kFloat: {
      std::uint64_t bits = 0;
      for (int i = 0; i < 8; ++i) bits |= static_cast<std::uint64_t>(in.Byte()) << (8 * i);
      return Json(std::bit_cast<double>(bits));
    }
    case kString: {
      const std::string_view text = ReadString(in, string);
      return build ? Json(std::string(text)) : Json();
    }
    case kArray: {
      const std::size_t count = in.Count();
      if (!build) {
        for (std::size_t i = 0; i < count; ++i) UnpackValue(in, string, depth + 1, false);
        return Json();
      }
      Json array = Json::array();
      auto& items = array.get_ref<Json::array_t&>();
      items.reserve(count);
      for (std::size_t i = 0; i < count; ++i) {
        items.push_back(UnpackValue(in, string, depth + 1, true));
      }
      return array;
    }
    case kObject: {
      const std::size_t count = in.Count();
      if (!build) {
        for (std::size_t i = 0; i < count; ++i) {
          ReadString(in, string);
          UnpackValue(in, string, depth + 1, false);
        }
        return Json();
      }
      Json object = Json::object();
      // Appended as the vector it is: ordered_map's emplace looks for the key first, which made
      // an object of 100,000 keys quadratic. The keys were an object's, so they are distinct.
      auto& fields = static_cast<Json::object_t::Container&>(object.get_ref<Json::object_t&>());
      fields.reserve(count);
      for (std::size_t i = 0; i < count; ++i) {
        std::string name(ReadString(in, string));
        fields.emplace_back(std::move(name), UnpackValue(in, string, depth + 1, true));
      }
      return object;
    }
    case kBinary: {
      const std::string_view bytes = in.Bytes(in.Varint());
      if (!build) return Json();
      return Json::binary(std::vector<std::uint8_t>(bytes.begin(), bytes.end()));
    }
    default:
      in.Fail("an unknown tag");
  }
}

}  // namespace

std::vector<std::uint8_t> PackedJson::Pack(const Json& value, std::string_view owner) {
  return Packer(*this, owner).Finish(value);
}

Json PackedJson::Unpack(std::span<const std::uint8_t> bytes) const {
  Reader in(bytes);
  const auto text = [this, &in](std::uint32_t id, std::string_view written) -> std::string_view {
    if (id == kNone) return written;
    if (id >= entries_.size() || entries_[id].refs == 0) in.Fail("an unknown dictionary entry");
    return entries_[id].text;
  };
  Json value = UnpackValue(in, text, 0, true);
  if (!in.AtEnd()) in.Fail("bytes after the value");
  return value;
}

void PackedJson::Release(std::span<const std::uint8_t> bytes) {
  // Read through first, so that bytes Pack did not make release nothing.
  std::vector<std::uint32_t> ids;
  Reader in(bytes);
  const auto collect = [this, &in, &ids](std::uint32_t id, std::string_view) -> std::string_view {
    if (id == kNone) return {};
    if (id >= entries_.size() || entries_[id].refs == 0) in.Fail("an unknown dictionary entry");
    ids.push_back(id);
    return {};
  };
  UnpackValue(in, collect, 0, false);
  if (!in.AtEnd()) in.Fail("bytes after the value");
  for (const std::uint32_t id : ids) Drop(id);
}

std::size_t PackedJson::dictionary_bytes() const {
  // Each entry: its characters, a std::string and a count, and a table node (a view, an id, a
  // hash, a link); the filter of values seen once.
  return text_bytes_ + entries_.size() * sizeof(Entry) + ids_.size() * 48 +
         seen_.size() * sizeof(Seen);
}

std::uint32_t PackedJson::Take(const std::string& text, bool key, std::uint64_t owner) {
  if (const auto found = ids_.find(text); found != ids_.end()) {
    ++entries_[found->second].refs;
    return found->second;
  }
  if (key ? text.size() > kMaxKeyLength
          : text.size() < kMinValueLength || text.size() > kMaxValueLength) {
    return kNone;
  }
  if (!key) {
    // Shared from the second object that has it; the first keeps it in its bytes.
    if (seen_.empty()) seen_.resize(kSeenSlots);
    const std::uint64_t hash = Hash(text);
    Seen& seen = seen_[hash % kSeenSlots];
    if (seen.value != hash || seen.owner == owner) {
      seen = {hash, owner};
      return kNone;
    }
  }
  if (ids_.size() >= kMaxEntries) return kNone;
  std::uint32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = static_cast<std::uint32_t>(entries_.size());
    entries_.emplace_back();
  }
  Entry& entry = entries_[id];
  entry.text = text;
  entry.refs = 1;
  ids_.emplace(entry.text, id);
  text_bytes_ += text.size();
  return id;
}

void PackedJson::Drop(std::uint32_t id) {
  Entry& entry = entries_[id];
  if (--entry.refs > 0) return;
  ids_.erase(entry.text);
  text_bytes_ -= entry.text.size();
  std::string().swap(entry.text);
  free_.push_back(id);
}

}  // namespace ncclguard::kube
