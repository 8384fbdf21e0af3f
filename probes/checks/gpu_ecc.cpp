// Uncorrectable ECC errors: since the last driver load (volatile) means the GPU is failing now;
// only over its lifetime (aggregate) is history worth watching.
#include "probes/checks/gpu_health.h"

namespace ncclguard::probes {
namespace {

class GpuEcc : public Check {
 public:
  GpuEcc()
      : Check({"gpu-ecc", "node-hardware", core::FindingLevel::Fail, 110,
               "NVML uncorrectable ECC error counts of each GPU: since the driver loaded "
               "(volatile: Fail), or only over its lifetime (aggregate: Warn).",
               "Drain the node, reboot it and run dcgmi diag; replace the instance if the errors "
               "come back."}) {}

  CheckResult Run(ProbeContext& context) const override {
    return JudgeEachGpu(
        context, "0 uncorrectable ECC errors since the driver loaded",
        "ECC is disabled or not supported on these GPUs",
        [](const GpuDevice& device) -> std::optional<GpuVerdict> {
          if (!device.ecc) return std::nullopt;
          const EccErrors& ecc = *device.ecc;
          if (ecc.volatile_uncorrected > 0)
            return GpuVerdict{CheckStatus::Fail, std::to_string(ecc.volatile_uncorrected) +
                                                     " uncorrectable (volatile)"};
          if (ecc.aggregate_uncorrected > 0)
            return GpuVerdict{CheckStatus::Warn, std::to_string(ecc.aggregate_uncorrected) +
                                                     " uncorrectable (lifetime)"};
          return GpuVerdict{CheckStatus::Pass, ""};
        },
        "uncorrectable ECC errors since the driver loaded: processes on that GPU die (Xid "
        "48/94/95); drain, reboot, and run dcgmi diag",
        "uncorrectable ECC errors in the GPUs' lifetime, none since the driver loaded; watch "
        "for new ones",
        "no uncorrectable ECC errors");
  }
};

NCCLGUARD_REGISTER(GpuEcc);

}  // namespace
}  // namespace ncclguard::probes
