#include "controllers/diagnoses/log_lines.h"
#include "controllers/diagnosis.h"

namespace ncclguard::controllers::diagnoses {
namespace {

constexpr std::string_view kEfaPeerUnreachable = "efa-peer-unreachable";

// What libfabric's EFA provider and aws-ofi-nccl print when a peer's EFA device does not answer:
// the provider's error strings (efa_errno.h: 4126 UNESTABLISHED_RECV_UNRESP, 4124
// ESTABLISHED_RECV_UNRESP, and the device's UNREACH_REMOTE / UNRESP_REMOTE completions) quoted in
// the plugin's "NET/OFI Request ... completed with error" line, and the plugin's own failure to
// add a peer to its address vector. EFA is not IP: a security group that lets the TCP bootstrap
// through without a rule naming itself drops every EFA packet (guide section 2).
class EfaPeerUnreachable final : public Diagnosis {
 public:
  EfaPeerUnreachable()
      : Diagnosis({kEfaPeerUnreachable, "security-group", 25,
                   "aws-ofi-nccl or libfabric says an EFA peer did not answer: \"Unresponsive "
                   "receiver (reachable by EFA device but handshake failed)\" (EFA error 4126), "
                   "\"Unreachable remote\" or \"Unresponsive remote\", \"Unable to insert remote "
                   "address into address vector\"; or a peer that had answered stopped (4124).",
                   "Allow all traffic to and from the EFA security group itself, inbound and "
                   "outbound (EFA is not IP: a 0.0.0.0/0 or port rule does not carry it), and "
                   "check with fi_pingpong -p efa between two nodes; after 4124 read the peer's "
                   "own log first, its process or node may have died."}) {}

  std::vector<std::string> Find(const DiagnosisContext&) const override { return {}; }
};

NCCLGUARD_REGISTER(EfaPeerUnreachable);

class EfaPeerUnreachableLog final : public LineMatcher {
 public:
  static constexpr std::string_view kDiagnosis = kEfaPeerUnreachable;
  EfaPeerUnreachableLog()
      : LineMatcher(kDiagnosis,
                    "an EFA peer did not answer (libfabric: unresponsive receiver or unreachable "
                    "remote; a security group without its self-referencing rule)") {}

 protected:
  bool Matches(std::string_view text) const override {
    return LogContains(text, "Unresponsive receiver") || LogContains(text, "Error: 4126") ||
           LogContains(text, "Error: 4124") || LogContains(text, "Unreachable remote") ||
           LogContains(text, "Unresponsive remote") ||
           LogContains(text, "insert remote address into address vector");
  }
};

NCCLGUARD_REGISTER(EfaPeerUnreachableLog);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
