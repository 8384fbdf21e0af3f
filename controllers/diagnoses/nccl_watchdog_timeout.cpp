#include "controllers/diagnoses/log_lines.h"
#include "controllers/diagnoses/pod_status.h"
#include "controllers/diagnosis.h"
#include "controllers/json_fields.h"

namespace ncclguard::controllers::diagnoses {
namespace {

class NcclWatchdogTimeout final : public Diagnosis {
 public:
  NcclWatchdogTimeout()
      : Diagnosis({"nccl-watchdog-timeout", "nccl-timeout", 30,
                   "A container's termination message or log has PyTorch's \"Watchdog caught "
                   "collective operation timeout\" (ProcessGroupNCCL).",
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

NCCLGUARD_REGISTER(NcclWatchdogTimeout);

// "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE,
// ...) ran for 600054 milliseconds before timing out." (PyTorch 1.13-2.5; newer prefixes
// "[PG ID 0 PG GUID 0(default_pg) Rank 3]"), and the watchdog's own hang report.
class NcclWatchdogTimeoutLog final : public LineMatcher {
 public:
  static constexpr std::string_view kDiagnosis = "nccl-watchdog-timeout";
  NcclWatchdogTimeoutLog() : LineMatcher(kDiagnosis, "stopped on an NCCL watchdog timeout") {}

 protected:
  bool Matches(std::string_view text) const override {
    if (text.find("atchdog") == std::string_view::npos) return false;  // fast path
    return Contains(text, "Watchdog caught collective operation timeout") ||
           Contains(text, "ProcessGroupNCCL's watchdog got stuck") ||
           Contains(text, "watchdog thread terminated with exception");
  }
};

NCCLGUARD_REGISTER(NcclWatchdogTimeoutLog);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
