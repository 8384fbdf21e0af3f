#include "probes/checks/check_util.h"

namespace ncclguard::probes {

std::optional<std::string> CudaUnavailable(const GpuFacts& facts) {
  if (!facts.cuda_loaded) return facts.cuda_error;
  return std::nullopt;
}

std::optional<std::string> NvmlUnavailable(const GpuFacts& facts) {
  if (facts.nvml_loaded) return std::nullopt;
  // Without libcuda the node has no usable driver at all; say that, not the NVML detail.
  if (!facts.cuda_loaded) return facts.cuda_error;
  return facts.nvml_error;
}

void AttachFix(CheckResult& result, const HostFix& fix, const std::string& placeholder,
               const std::string& value) {
  std::string command(fix.command);
  if (!placeholder.empty()) {
    for (auto at = command.find(placeholder); at != std::string::npos;
         at = command.find(placeholder, at + value.size()))
      command.replace(at, placeholder.size(), value);
  }
  result.suggested_command = command;
  result.blast_radius = std::string(fix.blast_radius);
}

std::string Join(const std::vector<std::string>& items, const std::string& separator) {
  std::string joined;
  for (const std::string& item : items) {
    if (!joined.empty()) joined += separator;
    joined += item;
  }
  return joined;
}

EfaSysfsCount CountEfaDevices(const HostFiles& files) {
  EfaSysfsCount count;
  for (const std::string& device : files.List("/sys/class/infiniband")) {
    const auto vendor = files.Read("/sys/class/infiniband/" + device + "/device/vendor", 64);
    if (!vendor.content || !Trim(*vendor.content).starts_with("0x")) {
      count.unreadable.push_back(device);
    } else if (Trim(*vendor.content) == "0x1d0f") {
      ++count.devices;
    }
  }
  for (const std::string& node : files.List("/dev/infiniband"))
    if (node.starts_with("uverbs")) ++count.uverbs;
  return count;
}

}  // namespace ncclguard::probes
