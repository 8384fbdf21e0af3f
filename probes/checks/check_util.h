#pragma once

#include <optional>
#include <string>
#include <vector>

#include "probes/check.h"
#include "probes/context.h"
#include "probes/host_fixes.h"

namespace ncclguard::probes {

// Why the GPU checks cannot run: no CUDA driver (libcuda), or, for the NVML-based checks, no
// NVML. nullopt when they can.
std::optional<std::string> CudaUnavailable(const GpuFacts& facts);
std::optional<std::string> NvmlUnavailable(const GpuFacts& facts);

// Attaches a guide host fix, with <placeholder> replaced.
void AttachFix(CheckResult& result, const HostFix& fix, const std::string& placeholder = "",
               const std::string& value = "");

std::string Join(const std::vector<std::string>& items, const std::string& separator = ", ");

// Number of EFA devices the kernel shows: /sys/class/infiniband entries whose PCI vendor is
// Amazon (0x1d0f), and /dev/infiniband/uverbs* nodes.
struct EfaSysfsCount {
  int devices = 0;
  int uverbs = 0;
  std::vector<std::string> unreadable;  // devices whose vendor file could not be read
};
EfaSysfsCount CountEfaDevices(const HostFiles& files);

}  // namespace ncclguard::probes
