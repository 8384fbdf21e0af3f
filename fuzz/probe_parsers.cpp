// The node probe's parsers of host files (logind.conf, /proc/self/limits, PCI config space),
// each fed what HostFiles::Read returns: at most the bytes the check reads. ParseMemlockLimit
// throws std::runtime_error for text it cannot read (its contract; the check reports it); the
// other parsers never throw. The first byte picks the parser.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "fuzz/fuzz_support.h"
#include "probes/host_parsers.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ncclguard;
  if (size < 1) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      const probes::RemoveIpcSetting setting = probes::ParseRemoveIpc(text.substr(0, 64 * 1024));
      for (const auto& problem : setting.problems) {
        fuzz::Require(!problem.empty(), "a logind.conf problem says what");
      }
      break;
    }
    case 1:
      try {
        const probes::MemlockLimit limit = probes::ParseMemlockLimit(text.substr(0, 64 * 1024));
        if (limit.soft && limit.hard) {
          (void)probes::FormatBytes(*limit.soft);
          (void)probes::FormatBytes(*limit.hard);
        }
      } catch (const std::runtime_error& e) {
        fuzz::Require(*e.what() != '\0', "a limits error says why");
      }
      break;
    case 2: {
      const probes::AcsCapability acs = probes::ParseAcs(text.substr(0, 4096));
      fuzz::Require(acs.error.empty() || !acs.present, "a malformed ACS capability is not present");
      (void)probes::DescribeAcsControl(acs.control);
      break;
    }
    default:
      (void)probes::ParseSystemdBoolean(text);
      break;
  }
  return 0;
}
