// The NVIDIA driver version and the newest CUDA it supports: an image built for a newer CUDA
// fails with "driver version is insufficient" on this node.
#include "probes/checks/check_util.h"

namespace ncclguard::probes {
namespace {

class DriverVersion : public Check {
 public:
  DriverVersion()
      : Check({"driver-version", "nccl-version", core::FindingLevel::Warn, 140,
               "The NVIDIA driver version (NVML) and the newest CUDA it supports "
               "(cuDriverGetVersion); Warn when NVML does not load, so the GPU health checks "
               "cannot run.",
               "Run images built for the driver's CUDA or older, keep the driver the same across "
               "a job's nodes, and install NVML (libnvidia-ml.so.1) with the driver."}) {}

  CheckResult Run(ProbeContext& context) const override {
    const GpuFacts& gpu = context.Gpu();
    if (const auto reason = CudaUnavailable(gpu)) return Result(CheckStatus::Skip, "", "", *reason);
    const int cuda = gpu.cuda_driver_version;
    const std::string cuda_text =
        "CUDA " + std::to_string(cuda / 1000) + "." + std::to_string((cuda % 1000) / 10);
    std::string observed = gpu.driver_version.empty() ? "" : "driver " + gpu.driver_version + ", ";
    observed += cuda_text;
    if (!gpu.nvml_loaded)
      return Result(CheckStatus::Warn, observed, "driver version from NVML",
                    "the CUDA driver loads but NVML does not (" + gpu.nvml_error +
                        "): GPU health checks cannot run");
    return Result(CheckStatus::Pass, observed, "",
                  "images built for " + cuda_text + " or older run on this node");
  }
};

NCCLGUARD_REGISTER(DriverVersion);

}  // namespace
}  // namespace ncclguard::probes
