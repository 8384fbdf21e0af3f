#include "probes/host_parsers.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "probes/host_files.h"

namespace ncclguard::probes {
namespace {

std::string Lower(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

std::optional<std::uint64_t> ParseLimitValue(const std::string& token) {
  if (token == "unlimited") return std::nullopt;
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (error != std::errc() || end != token.data() + token.size())
    throw std::runtime_error("'Max locked memory' value '" + token + "' is not a number");
  return value;
}

}  // namespace

std::optional<bool> ParseSystemdBoolean(std::string_view text) {
  const std::string value = Lower(Trim(text));
  for (const char* yes : {"1", "yes", "y", "true", "t", "on"})
    if (value == yes) return true;
  for (const char* no : {"0", "no", "n", "false", "f", "off"})
    if (value == no) return false;
  return std::nullopt;
}

RemoveIpcSetting ParseRemoveIpc(std::string_view text) {
  RemoveIpcSetting setting;
  std::istringstream lines{std::string(text)};
  std::string line;
  std::string section;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    const std::string trimmed = Trim(line);
    if (trimmed.empty() || trimmed.front() == '#' || trimmed.front() == ';') continue;
    if (trimmed.front() == '[') {
      section = trimmed;
      continue;
    }
    const auto equals = trimmed.find('=');
    if (equals == std::string::npos) continue;
    if (Trim(trimmed.substr(0, equals)) != "RemoveIPC") continue;
    const std::string raw = Trim(trimmed.substr(equals + 1));
    if (section != "[Login]") {
      setting.problems.push_back("line " + std::to_string(number) +
                                 ": RemoveIPC outside the [Login] section is ignored");
      continue;
    }
    if (const auto value = ParseSystemdBoolean(raw)) {
      setting.value = value;
    } else {
      setting.problems.push_back("line " + std::to_string(number) + ": RemoveIPC='" + raw +
                                 "' is not a boolean; logind ignores it");
    }
  }
  return setting;
}

MemlockLimit ParseMemlockLimit(std::string_view limits_text) {
  std::istringstream lines{std::string(limits_text)};
  std::string line;
  constexpr std::string_view kName = "Max locked memory";
  while (std::getline(lines, line)) {
    if (!line.starts_with(kName)) continue;
    std::istringstream fields(line.substr(kName.size()));
    std::string soft;
    std::string hard;
    if (!(fields >> soft >> hard))
      throw std::runtime_error("'Max locked memory' line has no soft and hard limit");
    return {ParseLimitValue(soft), ParseLimitValue(hard)};
  }
  throw std::runtime_error("no 'Max locked memory' line");
}

AcsCapability ParseAcs(std::string_view config) {
  constexpr std::size_t kExtendedStart = 0x100;
  constexpr std::uint16_t kAcsId = 0x000d;
  AcsCapability acs;
  if (config.size() < kExtendedStart + 4) {
    acs.error = "config space has " + std::to_string(config.size()) +
                " bytes; extended capabilities need 4096 (read it as root)";
    return acs;
  }
  auto u16 = [&](std::size_t at) {
    return static_cast<std::uint16_t>(static_cast<unsigned char>(config[at]) |
                                      static_cast<unsigned char>(config[at + 1]) << 8);
  };
  std::size_t offset = kExtendedStart;
  // A well-formed list has fewer entries than this; a loop in a corrupt one must end.
  for (int visited = 0; visited < 128; ++visited) {
    if (offset + 8 > config.size()) {
      char at[16];
      std::snprintf(at, sizeof at, "0x%zx", offset);
      acs.error = std::string("capability at ") + at + " runs past the config space";
      return acs;
    }
    const std::uint32_t header = u16(offset) | static_cast<std::uint32_t>(u16(offset + 2)) << 16;
    if (header == 0 || header == 0xffffffff) return acs;  // no extended capabilities
    if ((header & 0xffff) == kAcsId) {
      acs.present = true;
      acs.control = u16(offset + 6);
      return acs;
    }
    const std::size_t next = (header >> 20) & 0xffc;
    if (next == 0) return acs;
    if (next < kExtendedStart) {
      acs.error = "malformed extended capability list";
      return acs;
    }
    offset = next;
  }
  acs.error = "extended capability list loops";
  return acs;
}

std::string DescribeAcsControl(std::uint16_t control) {
  static constexpr std::array<const char*, 7> kNames{
      "SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans"};
  std::string text;
  for (std::size_t bit = 0; bit < kNames.size(); ++bit) {
    if (!text.empty()) text += ' ';
    text += kNames[bit];
    text += (control >> bit) & 1 ? '+' : '-';
  }
  return text;
}

std::string FormatBytes(std::uint64_t bytes) {
  static constexpr std::array<const char*, 5> kUnits{"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < kUnits.size()) {
    value /= 1024;
    ++unit;
  }
  char buffer[32];
  if (unit == 0) {
    std::snprintf(buffer, sizeof buffer, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buffer, sizeof buffer, "%.1f %s", value, kUnits[unit]);
  }
  return buffer;
}

}  // namespace ncclguard::probes
