#pragma once

#include <functional>

#include "probes/checks/check_util.h"

namespace ncclguard::probes {

// The per-GPU NVML checks share one shape: skip without NVML or GPUs, judge each GPU, skip when
// no GPU supports the query, else the worst verdict.
struct GpuVerdict {
  CheckStatus status = CheckStatus::Pass;
  std::string detail;  // for the observed list, e.g. "GPU 3: pending remap"
};
CheckResult JudgeEachGpu(ProbeContext& context, const std::string& expected,
                         const std::string& unsupported_message,
                         const std::function<std::optional<GpuVerdict>(const GpuDevice&)>& judge,
                         const std::string& fail_message, const std::string& warn_message,
                         const std::string& pass_message);

}  // namespace ncclguard::probes
