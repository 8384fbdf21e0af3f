// HBM row remapping: a pending remap needs a GPU reset, a failed one a new GPU.
#include "probes/checks/gpu_health.h"

namespace ncclguard::probes {
namespace {

class GpuRowRemap : public Check {
 public:
  GpuRowRemap()
      : Check({"gpu-row-remap", "gpu-row-remap", core::FindingLevel::Fail, 100,
               "NVML row remapping of each GPU's HBM: a pending remap needs a GPU reset, a failed "
               "one means the GPU must be replaced.",
               "Drain the node and reboot it (pending remap), or replace the instance (remapping "
               "failure)."}) {}

  CheckResult Run(ProbeContext& context) const override {
    return JudgeEachGpu(
        context, "no pending or failed row remap", "no GPU supports row remapping (pre-A100)",
        [](const GpuDevice& device) -> std::optional<GpuVerdict> {
          if (!device.row_remap) return std::nullopt;
          const RowRemap& remap = *device.row_remap;
          if (remap.failure) return GpuVerdict{CheckStatus::Fail, "remapping failure occurred"};
          if (remap.pending) return GpuVerdict{CheckStatus::Fail, "remap pending (reset needed)"};
          if (remap.uncorrectable > 0)
            return GpuVerdict{CheckStatus::Pass, std::to_string(remap.uncorrectable) +
                                                     " rows remapped for uncorrectable errors"};
          return GpuVerdict{CheckStatus::Pass, ""};
        },
        "a GPU has a pending or failed row remap: drain the node and reboot (pending) or "
        "replace the instance (failure)",
        "", "no pending or failed row remap");
  }
};

NCCLGUARD_REGISTER(GpuRowRemap);

}  // namespace
}  // namespace ncclguard::probes
