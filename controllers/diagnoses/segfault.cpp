#include "controllers/diagnoses/pod_status.h"
#include "controllers/diagnosis.h"
#include "controllers/json_fields.h"

namespace ncclguard::controllers::diagnoses {
namespace {

class Segfault final : public Diagnosis {
 public:
  Segfault()
      : Diagnosis({"segfault", "nccl-version", 40,
                   "A container exited with code 139 (or signal 11).",
                   "A crash in native code: check that the image's NCCL, CUDA and the node "
                   "driver match, and pin the image."}) {}

  std::vector<std::string> Find(const DiagnosisContext& context) const override {
    std::vector<std::string> lines;
    ForEachTermination(context.pods, [&](const Json& pod, const Json& status, const Json& t) {
      if (IntField(t, "exitCode") == 139 || IntField(t, "signal") == 11) {
        lines.push_back(Subject(pod, status) + " exited with code 139 (segmentation fault)");
      }
    });
    return Distinct(std::move(lines));
  }
};

NCCLGUARD_REGISTER(Segfault);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
