#include "controllers/diagnoses/pod_status.h"
#include "controllers/diagnosis.h"
#include "controllers/json_fields.h"

namespace ncclguard::controllers::diagnoses {
namespace {

class UntoleratedTaint final : public Diagnosis {
 public:
  UntoleratedTaint()
      : Diagnosis(
            {"untolerated-taint", "pod-lifecycle", 80,
             "A FailedScheduling Event or PodScheduled=False condition says had untolerated taint.",
             "Add a toleration for the GPU nodes' taint (e.g. nvidia.com/gpu) or target "
             "other nodes."}) {}

  std::vector<std::string> Find(const DiagnosisContext& context) const override {
    return SchedulingFailures(context.pods, context.events, "had untolerated taint");
  }
};

NCCLGUARD_REGISTER(UntoleratedTaint);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
