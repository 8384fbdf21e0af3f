#include "controllers/diagnoses/log_lines.h"
#include "controllers/diagnoses/pod_status.h"
#include "controllers/diagnosis.h"
#include "controllers/json_fields.h"

namespace ncclguard::controllers::diagnoses {
namespace {

class GpuOom final : public Diagnosis {
 public:
  GpuOom()
      : Diagnosis({"gpu-oom", "gpu-oom", 10,
                   "A container's termination message or log says CUDA out of memory (or "
                   "torch.OutOfMemoryError, cudaErrorMemoryAllocation, NCCL's Cuda failure "
                   "'out of memory').",
                   "Lower the per-GPU batch size, enable activation checkpointing or shard the "
                   "model (FSDP/ZeRO); NCCL buffers need GPU memory too."}) {}

  std::vector<std::string> Find(const DiagnosisContext& context) const override {
    std::vector<std::string> lines;
    ForEachTermination(context.pods, [&](const Json& pod, const Json& status, const Json& t) {
      // The termination message is the container's log tail with FallbackToLogsOnError.
      const std::string message = StringField(t, "message");
      if (Contains(message, "CUDA out of memory") ||
          Contains(message, "CUDA error: out of memory") ||
          Contains(message, "torch.OutOfMemoryError") ||
          Contains(message, "torch.cuda.OutOfMemoryError")) {
        lines.push_back(Subject(pod, status) + " ran out of GPU memory (CUDA out of memory)");
      }
    });
    return Distinct(std::move(lines));
  }
};

NCCLGUARD_REGISTER(GpuOom);

// PyTorch's and NCCL's ways of saying it: "torch.OutOfMemoryError: CUDA out of memory. Tried to
// allocate ...", "RuntimeError: CUDA error: out of memory", "cudaErrorMemoryAllocation",
// "NCCL WARN Cuda failure 'out of memory'" (2.18-2.20) / "Cuda failure 2 'out of memory'".
class GpuOomLog final : public LineMatcher {
 public:
  static constexpr std::string_view kDiagnosis = "gpu-oom";
  GpuOomLog() : LineMatcher(kDiagnosis, "ran out of GPU memory (CUDA out of memory)") {}

 protected:
  bool Matches(std::string_view text) const override {
    if (text.find("emory") == std::string_view::npos) return false;  // fast path
    return Contains(text, "CUDA out of memory") || Contains(text, "CUDA error: out of memory") ||
           Contains(text, "cudaErrorMemoryAllocation") || Contains(text, "OutOfMemoryError") ||
           (Contains(text, "Cuda failure") && Contains(text, "out of memory"));
  }
};

NCCLGUARD_REGISTER(GpuOomLog);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
