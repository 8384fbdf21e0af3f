// ACS on the PCIe bridges above each GPU and EFA device: redirect bits send peer-to-peer DMA up
// to the root complex, which blocks or slows NVLink-less P2P and GPUDirect RDMA.
#include <filesystem>
#include <map>
#include <regex>

#include "probes/checks/check_util.h"
#include "probes/host_parsers.h"

namespace ncclguard::probes {
namespace {

bool IsPciAddress(const std::string& name) {
  static const std::regex kAddress("[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]");
  return std::regex_match(name, kAddress);
}

struct PciScan {
  int gpus = 0;
  int efa = 0;
  // Bridge address -> its sysfs directory, for every bridge above a GPU or EFA device.
  std::map<std::string, std::filesystem::path> bridges;
};

std::string Attribute(const HostFiles& files, const std::filesystem::path& device,
                      const char* name) {
  const auto text = files.ReadPath(device / name, 64);
  return text.content ? Trim(*text.content) : "";
}

void Walk(const HostFiles& files, const std::filesystem::path& directory,
          std::vector<std::pair<std::string, std::filesystem::path>>& ancestors, PciScan& scan,
          int depth) {
  if (depth > 16) return;  // PCIe trees are a few levels deep; never follow a loop
  std::error_code error;
  for (std::filesystem::directory_iterator it(directory, error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    std::error_code type_error;
    if (!IsPciAddress(name) || it->is_symlink(type_error) || !it->is_directory(type_error))
      continue;
    const std::string vendor = Attribute(files, it->path(), "vendor");
    const std::string device_class = Attribute(files, it->path(), "class");
    const bool gpu = vendor == "0x10de" &&
                     (device_class.starts_with("0x0302") || device_class.starts_with("0x0300"));
    const bool efa = vendor == "0x1d0f" && device_class.starts_with("0x0200") &&
                     Attribute(files, it->path(), "device").starts_with("0xefa");
    if (gpu || efa) {
      (gpu ? scan.gpus : scan.efa) += 1;
      for (const auto& [address, path] : ancestors) scan.bridges.emplace(address, path);
    }
    ancestors.emplace_back(name, it->path());
    Walk(files, it->path(), ancestors, scan, depth + 1);
    ancestors.pop_back();
  }
}

class PciAcs : public Check {
 public:
  PciAcs()
      : Check({"pci-acs", "gpu-p2p", core::FindingLevel::Fail, 90,
               "ACS control of every PCIe bridge above a GPU or EFA device, read from sysfs "
               "config space (needs root): redirect bits send peer-to-peer DMA to the root "
               "complex.",
               "Clear the ACS controls of the listed bridges with setpci (the suggested command) "
               "at every boot, since a reboot restores them, or disable ACS in the BIOS."}) {}

  CheckResult Run(ProbeContext& context) const override {
    const HostFiles& files = context.Files();
    PciScan scan;
    for (const std::string& root : files.List("/sys/devices")) {
      if (!root.starts_with("pci")) continue;
      std::vector<std::pair<std::string, std::filesystem::path>> ancestors;
      Walk(files, files.Path("/sys/devices/" + root), ancestors, scan, 0);
    }
    if (scan.gpus + scan.efa == 0)
      return Result(CheckStatus::Skip, "", "", "no NVIDIA GPU or EFA device under /sys/devices");

    std::vector<std::string> redirecting;
    std::vector<std::string> unreadable;
    for (const auto& [address, path] : scan.bridges) {
      const auto config = files.ReadPath(path / "config", 4096);
      if (!config.content) {
        unreadable.push_back(address + " (" + config.error + ")");
        continue;
      }
      const AcsCapability acs = ParseAcs(*config.content);
      if (!acs.error.empty()) {
        unreadable.push_back(address + " (" + acs.error + ")");
      } else if (acs.present && (acs.control & kAcsRedirectBits) != 0) {
        redirecting.push_back(address + " [" + DescribeAcsControl(acs.control) + "]");
      }
    }

    std::string observed = std::to_string(scan.bridges.size()) + " bridges above " +
                           std::to_string(scan.gpus) + " GPUs and " + std::to_string(scan.efa) +
                           " EFA devices";
    if (!redirecting.empty()) observed += "; redirecting: " + Join(redirecting);
    if (!unreadable.empty()) observed += "; unreadable: " + Join(unreadable);
    const std::string expected = "no ReqRedir/CmpltRedir/EgressCtrl on those bridges";

    if (!redirecting.empty()) {
      CheckResult result =
          Result(CheckStatus::Fail, observed, expected,
                 std::to_string(redirecting.size()) +
                     (redirecting.size() == 1 ? " bridge redirects" : " bridges redirect") +
                     " peer-to-peer traffic to the root complex: GPU P2P and GPUDirect RDMA "
                     "below them are blocked or slow");
      std::vector<std::string> commands;
      for (const std::string& entry : redirecting) {
        CheckResult one;
        AttachFix(one, kClearAcs, "<bdf>", entry.substr(0, entry.find(' ')));
        commands.push_back(one.suggested_command);
      }
      AttachFix(result, kClearAcs);
      result.suggested_command = Join(commands, "\n");
      return result;
    }
    if (!unreadable.empty())
      return Result(CheckStatus::Warn, observed, expected,
                    "could not read the ACS state of every bridge above the GPUs and EFA devices");
    return Result(CheckStatus::Pass, observed, expected, "no bridge redirects peer traffic");
  }
};

NCCLGUARD_REGISTER(PciAcs);

}  // namespace
}  // namespace ncclguard::probes
