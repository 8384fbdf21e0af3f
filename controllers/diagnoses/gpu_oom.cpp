#include "controllers/diagnoses/pod_status.h"
#include "controllers/diagnosis.h"
#include "controllers/json_fields.h"

namespace ncclguard::controllers::diagnoses {
namespace {

class GpuOom final : public Diagnosis {
 public:
  GpuOom()
      : Diagnosis({"gpu-oom", "gpu-oom", 10,
                   "A container's termination message says CUDA out of memory (or "
                   "torch.OutOfMemoryError).",
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

NCCLGUARD_REGISTER_DIAGNOSIS(GpuOom);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
