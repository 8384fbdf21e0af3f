#include "core/base64.h"

namespace ncclguard::core {

std::optional<std::string> DecodeBase64(std::string_view text, std::string* problem) {
  const auto value_of = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve(text.size() / 4 * 3 + 3);
  unsigned buffer = 0;
  int bits = 0;
  bool padding = false;
  for (const char c : text) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      padding = true;
      continue;
    }
    const int value = value_of(c);
    if (value < 0 || padding) {
      if (problem != nullptr) *problem = "unexpected '" + std::string(1, c) + "'";
      return std::nullopt;
    }
    buffer = (buffer << 6) | static_cast<unsigned>(value);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xFFu));
    }
  }
  if (bits >= 6) {
    if (problem != nullptr) *problem = "truncated";
    return std::nullopt;
  }
  return out;
}

}  // namespace ncclguard::core
