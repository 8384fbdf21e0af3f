#include "controllers/diagnoses/pod_status.h"
#include "controllers/diagnosis.h"
#include "controllers/json_fields.h"

namespace ncclguard::controllers::diagnoses {
namespace {

class EfaUnschedulable final : public Diagnosis {
 public:
  EfaUnschedulable()
      : Diagnosis({"efa-unschedulable", "efa-tcp-fallback", 70,
                   "A FailedScheduling Event or PodScheduled=False condition says Insufficient "
                   "vpc.amazonaws.com/efa.",
                   "No node offers the EFA devices requested: check the EFA device plugin on the "
                   "nodes and that the request matches the instance type."}) {}

  std::vector<std::string> Find(const DiagnosisContext& context) const override {
    return SchedulingFailures(context.pods, context.events, "Insufficient vpc.amazonaws.com/efa");
  }
};

NCCLGUARD_REGISTER_DIAGNOSIS(EfaUnschedulable);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
