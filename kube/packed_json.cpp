#include "kube/packed_json.h"

#include <bit>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace ncclguard::kube {
namespace {

using core::Json;

// One byte before each value says what follows.
enum Tag : std::uint8_t {
  kNull = 0,
  kFalse = 1,
  kTrue = 2,
  kUnsigned = 3,  // varint
  kInteger = 4,   // zigzag varint
  kFloat = 5,     // 8 bytes, little-endian IEEE 754
  kString = 6,    // varint length, bytes
  kArray = 7,     // varint count, values
  kObject = 8,    // varint count, (key, value) pairs; a key is a varint k: k odd, dictionary
                  // entry k >> 1; k even, k >> 1 bytes follow
  kBinary = 9,    // varint length, bytes (a Json binary's subtype is not kept)
};

void PutVarint(std::uint64_t value, std::vector<std::uint8_t>& out) {
  while (value >= 0x80) {
    out.push_back(static_cast<std::uint8_t>(value | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<std::uint8_t>(value));
}

void PutBytes(std::string_view bytes, std::vector<std::uint8_t>& out) {
  PutVarint(bytes.size(), out);
  out.insert(out.end(), bytes.begin(), bytes.end());
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

Json UnpackValue(Reader& in, const std::deque<std::string>& keys, int depth) {
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
    case kString:
      return Json(std::string(in.Bytes(in.Varint())));
    case kArray: {
      const std::size_t count = in.Count();
      Json array = Json::array();
      auto& items = array.get_ref<Json::array_t&>();
      items.reserve(count);
      for (std::size_t i = 0; i < count; ++i) items.push_back(UnpackValue(in, keys, depth + 1));
      return array;
    }
    case kObject: {
      const std::size_t count = in.Count();
      Json object = Json::object();
      auto& fields = object.get_ref<Json::object_t&>();
      fields.reserve(count);
      for (std::size_t i = 0; i < count; ++i) {
        const std::uint64_t key = in.Varint();
        std::string name;
        if ((key & 1) != 0) {
          if ((key >> 1) >= keys.size()) in.Fail("a key not in the dictionary");
          name = keys[static_cast<std::size_t>(key >> 1)];
        } else {
          name = std::string(in.Bytes(key >> 1));
        }
        fields.emplace(std::move(name), UnpackValue(in, keys, depth + 1));
      }
      return object;
    }
    case kBinary: {
      const std::string_view bytes = in.Bytes(in.Varint());
      return Json::binary(std::vector<std::uint8_t>(bytes.begin(), bytes.end()));
    }
    default:
      in.Fail("an unknown tag");
  }
}

}  // namespace

std::vector<std::uint8_t> PackedJson::Pack(const Json& value) {
  std::vector<std::uint8_t> out;
  out.reserve(256);
  PackValue(value, 0, out);
  out.shrink_to_fit();
  return out;
}

Json PackedJson::Unpack(std::span<const std::uint8_t> bytes) const {
  Reader in(bytes);
  Json value = UnpackValue(in, keys_, 0);
  if (!in.AtEnd()) in.Fail("bytes after the value");
  return value;
}

std::size_t PackedJson::dictionary_bytes() const {
  // Each key: its characters, a std::string, and a table node (a view, an id, a hash, a link).
  return key_bytes_ + keys_.size() * (sizeof(std::string) + 48);
}

void PackedJson::PackKey(const std::string& key, std::vector<std::uint8_t>& out) {
  if (const auto found = ids_.find(key); found != ids_.end()) {
    PutVarint((static_cast<std::uint64_t>(found->second) << 1) | 1, out);
    return;
  }
  if (key.size() <= kMaxKeyLength && keys_.size() < kMaxKeys &&
      key_bytes_ + key.size() <= kMaxKeyBytes) {
    const auto id = static_cast<std::uint32_t>(keys_.size());
    const std::string& stored = keys_.emplace_back(key);
    ids_.emplace(stored, id);
    key_bytes_ += key.size();
    PutVarint((static_cast<std::uint64_t>(id) << 1) | 1, out);
    return;
  }
  PutVarint(static_cast<std::uint64_t>(key.size()) << 1, out);
  out.insert(out.end(), key.begin(), key.end());
}

void PackedJson::PackValue(const Json& value, int depth, std::vector<std::uint8_t>& out) {
  if (depth > kMaxDepth) throw std::runtime_error("packing a cached object: nested too deeply");
  switch (value.type()) {
    case Json::value_t::null:
    case Json::value_t::discarded:
      out.push_back(kNull);
      return;
    case Json::value_t::boolean:
      out.push_back(value.get<bool>() ? kTrue : kFalse);
      return;
    case Json::value_t::number_unsigned:
      out.push_back(kUnsigned);
      PutVarint(value.get<Json::number_unsigned_t>(), out);
      return;
    case Json::value_t::number_integer: {
      const auto signed_value = value.get<Json::number_integer_t>();
      out.push_back(kInteger);
      PutVarint((static_cast<std::uint64_t>(signed_value) << 1) ^
                    static_cast<std::uint64_t>(signed_value >> 63),
                out);
      return;
    }
    case Json::value_t::number_float: {
      out.push_back(kFloat);
      const auto bits = std::bit_cast<std::uint64_t>(value.get<double>());
      for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(bits >> (8 * i)));
      return;
    }
    case Json::value_t::string:
      out.push_back(kString);
      PutBytes(value.get_ref<const std::string&>(), out);
      return;
    case Json::value_t::array:
      out.push_back(kArray);
      PutVarint(value.size(), out);
      for (const Json& item : value) PackValue(item, depth + 1, out);
      return;
    case Json::value_t::object:
      out.push_back(kObject);
      PutVarint(value.size(), out);
      for (const auto& [key, item] : value.get_ref<const Json::object_t&>()) {
        PackKey(key, out);
        PackValue(item, depth + 1, out);
      }
      return;
    case Json::value_t::binary: {
      const auto& binary = value.get_binary();
      out.push_back(kBinary);
      PutVarint(binary.size(), out);
      out.insert(out.end(), binary.begin(), binary.end());
      return;
    }
  }
}

}  // namespace ncclguard::kube
