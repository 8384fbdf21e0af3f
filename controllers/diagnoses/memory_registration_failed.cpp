#include "controllers/diagnoses/log_lines.h"
#include "controllers/diagnosis.h"

namespace ncclguard::controllers::diagnoses {
namespace {

constexpr std::string_view kMemoryRegistrationFailed = "memory-registration-failed";

class MemoryRegistrationFailed final : public Diagnosis {
 public:
  MemoryRegistrationFailed()
      : Diagnosis({kMemoryRegistrationFailed, "memlock", 12,
                   "A log says registering memory with the NIC failed for lack of locked memory: "
                   "aws-ofi-nccl \"Unable to register memory ... RC: -12, Error: Cannot allocate "
                   "memory\", libfabric or rdma-core ibv_reg_mr / fi_mr_reg failures (ENOMEM).",
                   "Give the container IPC_LOCK (the webhook adds it to EFA containers) and an "
                   "unlimited memlock limit on the node (LimitMEMLOCK=infinity for containerd)."}) {
  }

  std::vector<std::string> Find(const DiagnosisContext&) const override { return {}; }
};

NCCLGUARD_REGISTER(MemoryRegistrationFailed);

class MemoryRegistrationFailedLog final : public LineMatcher {
 public:
  static constexpr std::string_view kDiagnosis = kMemoryRegistrationFailed;
  MemoryRegistrationFailedLog()
      : LineMatcher(kDiagnosis, "registering memory with the NIC failed (locked-memory limit)") {}

 protected:
  bool Matches(std::string_view text) const override {
    // -22 / Invalid argument is a version combination, not memlock (guide section 10).
    const bool registering =
        LogContains(text, "register memory") || LogContains(text, "ibv_reg_mr") ||
        LogContains(text, "fi_mr_reg") || LogContains(text, "efa_mr_reg") ||
        LogContains(text, "Unable to register MR") || LogContains(text, "reg_mr failed");
    if (!registering) return false;
    if (LogContains(text, "Invalid argument") || LogContains(text, "RC: -22")) return false;
    return LogContains(text, "Cannot allocate memory") || LogContains(text, "RC: -12") ||
           LogContains(text, "ENOMEM") || LogContainsNoCase(text, "memlock");
  }
};

NCCLGUARD_REGISTER(MemoryRegistrationFailedLog);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
