#include "probes/checks/gpu_health.h"

namespace ncclguard::probes {

CheckResult JudgeEachGpu(ProbeContext& context, const std::string& expected,
                         const std::string& unsupported_message,
                         const std::function<std::optional<GpuVerdict>(const GpuDevice&)>& judge,
                         const std::string& fail_message, const std::string& warn_message,
                         const std::string& pass_message) {
  const GpuFacts& gpu = context.Gpu();
  if (const auto reason = NvmlUnavailable(gpu)) return Result(CheckStatus::Skip, "", "", *reason);
  if (gpu.devices.empty()) return Result(CheckStatus::Skip, "0 GPUs", "", "no GPUs on this node");

  CheckStatus worst = CheckStatus::Pass;
  int supported = 0;
  std::vector<std::string> details;
  for (const GpuDevice& device : gpu.devices) {
    const auto verdict = judge(device);
    if (!verdict) continue;
    ++supported;
    if (!verdict->detail.empty())
      details.push_back("GPU " + std::to_string(device.index) + ": " + verdict->detail);
    if (verdict->status == CheckStatus::Fail) worst = CheckStatus::Fail;
    if (verdict->status == CheckStatus::Warn && worst == CheckStatus::Pass)
      worst = CheckStatus::Warn;
  }
  if (supported == 0) return Result(CheckStatus::Skip, "", "", unsupported_message);
  std::string observed = std::to_string(supported) + " GPUs checked";
  if (!details.empty()) observed += "; " + Join(details, "; ");
  const std::string& message = worst == CheckStatus::Fail   ? fail_message
                               : worst == CheckStatus::Warn ? warn_message
                                                            : pass_message;
  CheckResult result = Result(worst, observed, expected, message);
  if (worst == CheckStatus::Fail) {
    const std::string& node = context.Options().node_name;
    AttachFix(result, kDrainNode, "<node>", node.empty() ? "<node>" : node);
  }
  return result;
}

}  // namespace ncclguard::probes
