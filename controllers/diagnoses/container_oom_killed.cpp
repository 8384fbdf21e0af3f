#include "controllers/diagnoses/pod_status.h"
#include "controllers/diagnosis.h"
#include "controllers/json_fields.h"

namespace ncclguard::controllers::diagnoses {
namespace {

class ContainerOomKilled final : public Diagnosis {
 public:
  ContainerOomKilled()
      : Diagnosis({"container-oom-killed", "container-oom", 20,
                   "A container terminated with reason OOMKilled or exit code 137.",
                   "Raise the container's memory limit (host memory, not GPU memory), or lower "
                   "the data loader's workers and prefetch."}) {}

  std::vector<std::string> Find(const DiagnosisContext& context) const override {
    std::vector<std::string> lines;
    ForEachTermination(context.pods, [&](const Json& pod, const Json& status, const Json& t) {
      const std::string reason = StringField(t, "reason");
      const std::int64_t exit_code = IntField(t, "exitCode");
      if (reason == "OOMKilled") {
        lines.push_back(Subject(pod, status) + " was OOMKilled (exit code " +
                        std::to_string(exit_code) + ")");
      } else if (exit_code == 137) {
        lines.push_back(Subject(pod, status) +
                        " exited with code 137 (SIGKILL, usually the memory limit)");
      }
    });
    return Distinct(std::move(lines));
  }
};

NCCLGUARD_REGISTER(ContainerOomKilled);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
