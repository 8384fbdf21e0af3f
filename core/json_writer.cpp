#include "core/json_writer.h"

#include <charconv>

namespace ncclguard::core {
namespace {

Json::error_handler_t Handler(InvalidUtf8 invalid) {
  return invalid == InvalidUtf8::Replace ? Json::error_handler_t::replace
                                         : Json::error_handler_t::strict;
}

// What nlohmann writes for a byte below 0x20 (ensure_ascii off), or null when it writes the
// byte itself.
const char* ControlEscape(unsigned char byte, char (&buffer)[7]) {
  switch (byte) {
    case '\b':
      return "\\b";
    case '\t':
      return "\\t";
    case '\n':
      return "\\n";
    case '\f':
      return "\\f";
    case '\r':
      return "\\r";
    default:
      break;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  buffer[0] = '\\';
  buffer[1] = 'u';
  buffer[2] = '0';
  buffer[3] = '0';
  buffer[4] = kHex[byte >> 4];
  buffer[5] = kHex[byte & 0xF];
  buffer[6] = '\0';
  return buffer;
}

// Writes `text` quoted when every byte is ASCII; false (and `out` as it was) otherwise.
bool AppendAsciiString(std::string& out, std::string_view text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  out += '"';
  std::size_t run = 0;  // start of the bytes not yet written
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte >= 0x20 && byte != '"' && byte != '\\') continue;
    out.append(text.data() + run, i - run);
    run = i + 1;
    if (byte == '"') {
      out += "\\\"";
    } else if (byte == '\\') {
      out += "\\\\";
    } else {
      char buffer[7];
      out += ControlEscape(byte, buffer);
    }
  }
  out.append(text.data() + run, text.size() - run);
  out += '"';
  return true;
}

template <typename Integer>
void AppendInteger(std::string& out, Integer number) {
  char buffer[24];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, number).ptr;
  out.append(buffer, end);
}

void Append(std::string& out, const Json& value, InvalidUtf8 invalid) {
  switch (value.type()) {
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, member] : value.get_ref<const Json::object_t&>()) {
        if (!first) out += ',';
        first = false;
        AppendJsonString(out, key, invalid);
        out += ':';
        Append(out, member, invalid);
      }
      out += '}';
      return;
    }
    case Json::value_t::array: {
      out += '[';
      bool first = true;
      for (const Json& item : value) {
        if (!first) out += ',';
        first = false;
        Append(out, item, invalid);
      }
      out += ']';
      return;
    }
    case Json::value_t::string:
      if (!AppendAsciiString(out, value.get_ref<const std::string&>())) {
        out += value.dump(-1, ' ', false, Handler(invalid));
      }
      return;
    case Json::value_t::boolean:
      out += value.get<bool>() ? "true" : "false";
      return;
    case Json::value_t::null:
      out += "null";
      return;
    case Json::value_t::number_integer:
      AppendInteger(out, value.get<Json::number_integer_t>());
      return;
    case Json::value_t::number_unsigned:
      AppendInteger(out, value.get<Json::number_unsigned_t>());
      return;
    default:  // doubles, binary, discarded
      out += value.dump(-1, ' ', false, Handler(invalid));
      return;
  }
}

}  // namespace

void AppendJson(std::string& out, const Json& value, InvalidUtf8 invalid) {
  Append(out, value, invalid);
}

std::string WriteJson(const Json& value, InvalidUtf8 invalid) {
  std::string out;
  Append(out, value, invalid);
  return out;
}

void AppendJsonString(std::string& out, std::string_view text, InvalidUtf8 invalid) {
  if (!AppendAsciiString(out, text)) out += Json(text).dump(-1, ' ', false, Handler(invalid));
}

}  // namespace ncclguard::core
