#include "controllers/diagnoses/log_lines.h"
#include "controllers/diagnosis.h"

namespace ncclguard::controllers::diagnoses {
namespace {

constexpr std::string_view kMemoryRegistrationFailed = "memory-registration-failed";

class MemoryRegistrationFailed final : public Diagnosis {
 public:
  MemoryRegistrationFailed()
      : Diagnosis(
            {kMemoryRegistrationFailed, "memlock", 12,
             "A log says registering memory with the NIC failed for lack of locked memory: "
             "aws-ofi-nccl \"Unable to register memory ... RC: -12, Error: Cannot allocate "
             "memory\", libfabric or rdma-core ibv_reg_mr / fi_mr_reg failures (ENOMEM, error "
             "12).",
             "Give the container IPC_LOCK (the webhook adds it to EFA containers) and an "
             "unlimited memlock limit on the node (LimitMEMLOCK=infinity for containerd)."}) {}

  std::vector<std::string> Find(const DiagnosisContext&) const override { return {}; }
};

NCCLGUARD_REGISTER(MemoryRegistrationFailed);

// "errno 12", not "errno 121".
bool ErrnoTwelve(std::string_view text) {
  constexpr std::string_view kErrno = "errno 12";
  for (auto at = text.find(kErrno); at != std::string_view::npos; at = text.find(kErrno, at + 1)) {
    const std::size_t end = at + kErrno.size();
    if (end == text.size() || text[end] < '0' || text[end] > '9') return true;
  }
  return false;
}

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
    // ENOMEM in words, as a plugin's RC, or as a bare errno ("got error (12)", "errno 12").
    return LogContains(text, "Cannot allocate memory") || LogContains(text, "RC: -12") ||
           LogContains(text, "ENOMEM") || LogContainsNoCase(text, "memlock") ||
           LogContains(text, "error (12)") || ErrnoTwelve(text);
  }
};

NCCLGUARD_REGISTER(MemoryRegistrationFailedLog);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
