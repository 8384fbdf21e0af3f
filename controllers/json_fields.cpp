#include "controllers/json_fields.h"

namespace ncclguard::controllers {

std::string StringField(const core::Json& object, std::string_view key, std::string_view fallback) {
  if (!object.is_object()) return std::string(fallback);
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string(fallback);
}

std::int64_t IntField(const core::Json& object, std::string_view key, std::int64_t fallback) {
  if (!object.is_object()) return fallback;
  const auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<std::int64_t>() : fallback;
}

bool BoolField(const core::Json& object, std::string_view key, bool fallback) {
  if (!object.is_object()) return fallback;
  const auto it = object.find(key);
  return it != object.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

std::string TruncateUtf8(std::string text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::size_t cut = max_bytes < 3 ? 0 : max_bytes - 3;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  text.resize(cut);
  text += "...";
  return text;
}

}  // namespace ncclguard::controllers
