#include "controllers/timestamps.h"

#include <charconv>
#include <cstdio>

namespace ncclguard::controllers {
namespace {

bool ReadInt(std::string_view text, std::size_t at, std::size_t width, int& out) {
  if (at + width > text.size()) return false;
  const char* begin = text.data() + at;
  const char* end = begin + width;
  for (const char* p = begin; p != end; ++p) {
    if (*p < '0' || *p > '9') return false;
  }
  return std::from_chars(begin, end, out).ec == std::errc{};
}

}  // namespace

std::string FormatTime(Timestamp t) {
  const auto day = std::chrono::floor<std::chrono::days>(t);
  const std::chrono::year_month_day ymd(day);
  const std::chrono::hh_mm_ss hms(t - day);
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%04d-%02u-%02uT%02d:%02d:%02dZ", int(ymd.year()),
                unsigned(ymd.month()), unsigned(ymd.day()), int(hms.hours().count()),
                int(hms.minutes().count()), int(hms.seconds().count()));
  return buffer;
}

std::string FormatMicroTime(Timestamp t) {
  std::string text = FormatTime(t);
  text.insert(text.size() - 1, ".000000");
  return text;
}

std::optional<Timestamp> ParseTime(std::string_view text) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' ||
      (text[10] != 'T' && text[10] != 't') || text[13] != ':' || text[16] != ':') {
    return std::nullopt;
  }
  if (!ReadInt(text, 0, 4, year) || !ReadInt(text, 5, 2, month) || !ReadInt(text, 8, 2, day) ||
      !ReadInt(text, 11, 2, hour) || !ReadInt(text, 14, 2, minute) ||
      !ReadInt(text, 17, 2, second)) {
    return std::nullopt;
  }
  std::size_t at = 19;
  if (at < text.size() && text[at] == '.') {
    ++at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') ++at;
  }
  std::chrono::seconds offset{0};
  if (at < text.size() && (text[at] == 'Z' || text[at] == 'z') && at + 1 == text.size()) {
    // UTC
  } else if (at + 6 == text.size() && (text[at] == '+' || text[at] == '-') && text[at + 3] == ':') {
    int oh = 0, om = 0;
    if (!ReadInt(text, at + 1, 2, oh) || !ReadInt(text, at + 4, 2, om)) return std::nullopt;
    offset = std::chrono::hours(oh) + std::chrono::minutes(om);
    if (text[at] == '-') offset = -offset;
  } else {
    return std::nullopt;
  }
  const std::chrono::year_month_day ymd{std::chrono::year(year),
                                        std::chrono::month(static_cast<unsigned>(month)),
                                        std::chrono::day(static_cast<unsigned>(day))};
  if (!ymd.ok() || hour > 23 || minute > 59 || second > 60) return std::nullopt;
  return Timestamp(std::chrono::sys_days(ymd)) + std::chrono::hours(hour) +
         std::chrono::minutes(minute) + std::chrono::seconds(second) - offset;
}

}  // namespace ncclguard::controllers
