// GPUs the CUDA driver sees, against the catalog.
#include "probes/checks/check_util.h"

namespace ncclguard::probes {
namespace {

class GpuCount : public Check {
 public:
  GpuCount()
      : Check({"gpu-count", "node-hardware", core::FindingLevel::Fail, 70,
               "GPUs the CUDA driver (and NVML) sees, against the instance type's count in the "
               "catalog: a GPU fallen off the bus (Xid 79) leaves the node short.",
               "Drain the node and reboot it; replace the instance if a GPU is still missing."}) {}

  CheckResult Run(ProbeContext& context) const override {
    const GpuFacts& gpu = context.Gpu();
    const core::InstanceType* instance = context.Instance();
    const std::string expected =
        instance != nullptr ? std::to_string(instance->gpus) + " (" + instance->name + ")" : "";
    if (const auto reason = CudaUnavailable(gpu)) {
      if (instance != nullptr && instance->gpus > 0) {
        CheckResult result =
            Result(CheckStatus::Fail, *reason, expected,
                   *reason + " on a " + instance->name + ", which has " +
                       std::to_string(instance->gpus) + " GPUs: no GPU job can run here");
        AttachFix(result, kDrainNode, "<node>", NodeName(context));
        return result;
      }
      return Result(CheckStatus::Skip, "", expected, *reason);
    }
    std::string observed = std::to_string(gpu.cuda_device_count) + " (CUDA)";
    if (gpu.nvml_loaded) observed += ", " + std::to_string(gpu.devices.size()) + " (NVML)";
    if (instance == nullptr) return Result(CheckStatus::Skip, observed, "", context.CatalogGap());
    if (gpu.cuda_device_count < instance->gpus) {
      CheckResult result =
          Result(CheckStatus::Fail, observed, expected,
                 std::to_string(instance->gpus - gpu.cuda_device_count) +
                     " GPUs missing (fallen off the bus, Xid 79, or not initialised): 8-GPU "
                     "pods cannot be placed here and NCCL rings would be short");
      AttachFix(result, kDrainNode, "<node>", NodeName(context));
      return result;
    }
    if (gpu.cuda_device_count > instance->gpus)
      return Result(CheckStatus::Warn, observed, expected,
                    "more GPUs than the catalog lists for " + instance->name);
    return Result(CheckStatus::Pass, observed, expected,
                  std::to_string(instance->gpus) + " GPUs, as " + instance->name + " has");
  }

  static std::string NodeName(const ProbeContext& context) {
    return context.Options().node_name.empty() ? "<node>" : context.Options().node_name;
  }
};

NCCLGUARD_REGISTER(GpuCount);

}  // namespace
}  // namespace ncclguard::probes
