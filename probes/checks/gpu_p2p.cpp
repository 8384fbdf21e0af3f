// Peer access between every pair of GPUs (cuDeviceCanAccessPeer), and with --bandwidth the
// copy bandwidth per pair.
#include <algorithm>
#include <cstdio>

#include "probes/checks/check_util.h"

namespace ncclguard::probes {
namespace {

std::string Gbps(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f GB/s", value);
  return buffer;
}

class GpuP2p : public Check {
 public:
  GpuP2p()
      : Check({"gpu-p2p", "gpu-p2p", core::FindingLevel::Fail, 80,
               "cuDeviceCanAccessPeer for every pair of GPUs, and with --bandwidth the "
               "cuMemcpyPeer bandwidth per pair against the median.",
               "Check ACS on the PCIe bridges (check pci-acs), the IOMMU mode and the NVIDIA "
               "fabric manager; replace the instance if a pair stays blocked."}) {}

  CheckResult Run(ProbeContext& context) const override {
    const GpuFacts& gpu = context.Gpu();
    if (const auto reason = CudaUnavailable(gpu)) return Result(CheckStatus::Skip, "", "", *reason);
    const int n = gpu.cuda_device_count;
    if (n < 2)
      return Result(CheckStatus::Skip, std::to_string(n) + " GPUs", "",
                    "peer access needs at least 2 GPUs");
    if (!gpu.peer_access_error.empty())
      return Result(CheckStatus::Warn, "", "",
                    "cannot query peer access: " + gpu.peer_access_error);

    std::vector<std::string> blocked;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (i != j && !gpu.peer_access[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)])
          blocked.push_back(std::to_string(i) + "->" + std::to_string(j));
    const int pairs = n * (n - 1);
    std::string observed = std::to_string(pairs - static_cast<int>(blocked.size())) + " of " +
                           std::to_string(pairs) + " GPU pairs have peer access";
    if (!blocked.empty()) observed += "; none: " + Join(blocked);
    const std::string expected =
        "peer access between every pair of the " + std::to_string(n) + " GPUs";

    std::vector<double> bandwidths;
    std::vector<std::string> slow;
    for (int i = 0; i < n && !gpu.peer_bandwidth_gbps.empty(); ++i)
      for (int j = 0; j < n; ++j) {
        const double value =
            gpu.peer_bandwidth_gbps[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
        if (value > 0) bandwidths.push_back(value);
      }
    if (!bandwidths.empty()) {
      std::vector<double> sorted = bandwidths;
      std::sort(sorted.begin(), sorted.end());
      const double median = sorted[sorted.size() / 2];
      observed += "; copy bandwidth min " + Gbps(sorted.front()) + ", median " + Gbps(median) +
                  ", max " + Gbps(sorted.back());
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
          const double value =
              gpu.peer_bandwidth_gbps[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
          if (value > 0 && value < median / 2)
            slow.push_back(std::to_string(i) + "->" + std::to_string(j) + " " + Gbps(value));
        }
    }
    if (!gpu.bandwidth_error.empty()) observed += "; bandwidth test: " + gpu.bandwidth_error;

    if (!blocked.empty())
      return Result(CheckStatus::Fail, observed, expected,
                    "CUDA reports no peer access for " + std::to_string(blocked.size()) +
                        " GPU pairs: NCCL moves that traffic through host memory (SHM); check "
                        "ACS (pci-acs), the IOMMU mode and the fabric manager");
    if (!slow.empty())
      return Result(CheckStatus::Warn, observed, expected,
                    "peer copies well below the median on " + Join(slow));
    return Result(CheckStatus::Pass, observed, expected, "every GPU pair has peer access");
  }
};

NCCLGUARD_REGISTER(GpuP2p);

}  // namespace
}  // namespace ncclguard::probes
