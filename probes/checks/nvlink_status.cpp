// NVLink links each GPU has but reports inactive: NCCL then routes through PCIe or fails.
#include "probes/checks/gpu_health.h"

namespace ncclguard::probes {
namespace {

class NvlinkStatus : public Check {
 public:
  NvlinkStatus()
      : Check({"nvlink-status", "node-hardware", core::FindingLevel::Fail, 120,
               "NVML state of every NVLink link each GPU has: an inactive link makes intra-node "
               "collectives slow down or hang (Xid 74).",
               "Drain the node and reboot it; replace the instance if links go down again."}) {}

  CheckResult Run(ProbeContext& context) const override {
    return JudgeEachGpu(
        context, "every NVLink link active", "no NVLink on these GPUs",
        [](const GpuDevice& device) -> std::optional<GpuVerdict> {
          if (!device.nvlink) return std::nullopt;
          const NvLinks& links = *device.nvlink;
          if (!links.inactive.empty()) {
            std::vector<std::string> numbers;
            for (int link : links.inactive) numbers.push_back(std::to_string(link));
            return GpuVerdict{CheckStatus::Fail, std::to_string(links.active) +
                                                     " active, inactive links " + Join(numbers)};
          }
          return GpuVerdict{CheckStatus::Pass, std::to_string(links.active) + " links active"};
        },
        "NVLink links are down: intra-node collectives slow down or hang (Xid 74); drain and "
        "reboot, replace the instance if it repeats",
        "", "every NVLink link is active");
  }
};

NCCLGUARD_REGISTER(NvlinkStatus);

}  // namespace
}  // namespace ncclguard::probes
