#include "cli/duration.h"

#include <cctype>
#include <cstdint>
#include <stdexcept>

namespace ncclguard::cli {
namespace {

std::int64_t UnitMilliseconds(const std::string& unit) {
  if (unit == "ms") return 1;
  if (unit == "s" || unit.empty()) return 1000;
  if (unit == "m") return 60 * 1000;
  if (unit == "h") return 60 * 60 * 1000;
  return 0;
}

}  // namespace

std::chrono::milliseconds ParseDuration(const std::string& text, const std::string& flag) {
  auto invalid = [&](const std::string& why) {
    return std::invalid_argument(flag + " " + (text.empty() ? "\"\"" : text) + ": " + why +
                                 " (write it like 30s, 5m, 1h30m or 500ms)");
  };
  if (text.empty()) throw invalid("empty duration");
  constexpr std::int64_t kMaxMilliseconds = std::int64_t{1} << 50;
  std::int64_t total = 0;
  std::size_t at = 0;
  bool bare_number = true;
  while (at < text.size()) {
    if (!std::isdigit(static_cast<unsigned char>(text[at])))
      throw invalid("expected a number at \"" + text.substr(at) + "\"");
    std::int64_t value = 0;
    while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at]))) {
      value = value * 10 + (text[at] - '0');
      if (value > kMaxMilliseconds) throw invalid("too long");
      ++at;
    }
    std::string unit;
    while (at < text.size() && std::isalpha(static_cast<unsigned char>(text[at])))
      unit += text[at++];
    if (unit.empty() && at < text.size()) throw invalid("unexpected \"" + text.substr(at) + "\"");
    if (!unit.empty()) {
      bare_number = false;
    } else if (!bare_number || total != 0) {
      throw invalid("a number without a unit");
    }
    const std::int64_t factor = UnitMilliseconds(unit);
    if (factor == 0) throw invalid("unknown unit \"" + unit + "\"");
    if (value > kMaxMilliseconds / factor) throw invalid("too long");
    total += value * factor;
    if (total > kMaxMilliseconds) throw invalid("too long");
  }
  return std::chrono::milliseconds(total);
}

}  // namespace ncclguard::cli
