#include "probes/checks/gpu_health.h"

#include <algorithm>

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
  std::vector<std::string> raw_details;
  for (const GpuDevice& device : gpu.devices) {
    const auto verdict = judge(device);
    if (!verdict) continue;
    ++supported;
    raw_details.push_back(verdict->detail);
    if (!verdict->detail.empty())
      details.push_back("GPU " + std::to_string(device.index) + ": " + verdict->detail);
    if (verdict->status == CheckStatus::Fail) worst = CheckStatus::Fail;
    if (verdict->status == CheckStatus::Warn && worst == CheckStatus::Pass)
      worst = CheckStatus::Warn;
  }
  if (supported == 0) return Result(CheckStatus::Skip, "", "", unsupported_message);
  std::string observed = std::to_string(supported) + " GPUs checked";
  // Eight identical lines ("18 links active") say less than one.
  const bool all_same = std::all_of(raw_details.begin(), raw_details.end(),
                                    [&](const std::string& d) { return d == raw_details.front(); });
  if (all_same && supported > 1 && !raw_details.front().empty()) {
    observed += "; each: " + raw_details.front();
  } else if (!details.empty()) {
    observed += "; " + Join(details, "; ");
  }
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
