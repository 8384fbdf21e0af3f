#include "controllers/diagnoses/pod_status.h"
#include "controllers/diagnosis.h"
#include "controllers/json_fields.h"

namespace ncclguard::controllers::diagnoses {
namespace {

class NcclWatchdogTimeout final : public Diagnosis {
 public:
  NcclWatchdogTimeout()
      : Diagnosis({"nccl-watchdog-timeout", "nccl-timeout", 30,
                   "A container's termination message has PyTorch's \"Watchdog caught collective "
                   "operation timeout\" (ProcessGroupNCCL).",
                   "A collective never completed on every rank: look for the rank that stopped "
                   "first (a crash, a hang, a slow node), then check EFA and the network."}) {}

  std::vector<std::string> Find(const DiagnosisContext& context) const override {
    std::vector<std::string> lines;
    ForEachTermination(context.pods, [&](const Json& pod, const Json& status, const Json& t) {
      const std::string message = StringField(t, "message");
      // PyTorch's ProcessGroupNCCL watchdog, across versions.
      if (ContainsNoCase(message, "Watchdog caught collective operation timeout") ||
          ContainsNoCase(message, "ProcessGroupNCCL's watchdog") ||
          (ContainsNoCase(message, "NCCL") && ContainsNoCase(message, "watchdog") &&
           ContainsNoCase(message, "timeout"))) {
        lines.push_back(Subject(pod, status) + " stopped on an NCCL watchdog timeout");
      }
    });
    return Distinct(std::move(lines));
  }
};

NCCLGUARD_REGISTER_DIAGNOSIS(NcclWatchdogTimeout);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
