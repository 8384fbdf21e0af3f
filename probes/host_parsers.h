#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// Pure parsers of host files, kept apart from the I/O so that malformed input is easy to test.
namespace ncclguard::probes {

// RemoveIPC from one logind.conf-format file. `value` stays empty when the file does not set it
// (a later file, or logind's default of yes, decides). Lines logind would ignore are problems.
struct RemoveIpcSetting {
  std::optional<bool> value;
  std::vector<std::string> problems;
};
RemoveIpcSetting ParseRemoveIpc(std::string_view text);

// systemd's boolean spellings; nullopt for anything else.
std::optional<bool> ParseSystemdBoolean(std::string_view text);

// "Max locked memory" of a /proc/<pid>/limits file; nullopt limits mean unlimited.
struct MemlockLimit {
  std::optional<std::uint64_t> soft;
  std::optional<std::uint64_t> hard;
};
// Throws std::runtime_error naming what is wrong.
MemlockLimit ParseMemlockLimit(std::string_view limits_text);

// The ACS capability of a PCI function, from its config space (sysfs `config`).
struct AcsCapability {
  bool present = false;
  std::uint16_t control = 0;
  std::string error;  // config space too short or a malformed capability list
};
AcsCapability ParseAcs(std::string_view config_space);

// ACS control bits that send peer-to-peer traffic up to the root complex (P2P Request
// Redirect, P2P Completion Redirect, P2P Egress Control).
inline constexpr std::uint16_t kAcsRedirectBits = 0x0004 | 0x0008 | 0x0020;
// "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
std::string DescribeAcsControl(std::uint16_t control);

// "8.0 MiB", "512 B", "24.0 GiB"
std::string FormatBytes(std::uint64_t bytes);

}  // namespace ncclguard::probes
