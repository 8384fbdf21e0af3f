#include "controllers/diagnosis.h"
#include "controllers/log_scan.h"

namespace ncclguard::controllers::diagnoses {
namespace {

constexpr std::string_view kEfaTcpFallback = "efa-tcp-fallback";

// Seen only in logs (controllers/log_transport.h decides each source's transport).
class EfaTcpFallback final : public Diagnosis {
 public:
  EfaTcpFallback()
      : Diagnosis({kEfaTcpFallback, "efa-tcp-fallback", 55,
                   "NCCL's log says it moves data over TCP sockets (\"Using network Socket\", "
                   "\"via NET/Socket\", or aws-ofi-nccl on a libfabric provider other than efa) in "
                   "a pod that requested EFA: the job runs, 10-100x slower.",
                   "Give the pod its EFA devices (vpc.amazonaws.com/efa), put aws-ofi-nccl on the "
                   "library path and check FI_PROVIDER; verify with \"Selected Provider is efa\" "
                   "and \"Using network AWS Libfabric\" (or \"Libfabric\") in the log."}) {}

  std::vector<std::string> Find(const DiagnosisContext&) const override { return {}; }
};

NCCLGUARD_REGISTER(EfaTcpFallback);

class EfaTcpFallbackLog final : public LogMatcher {
 public:
  static constexpr std::string_view kDiagnosis = kEfaTcpFallback;
  void Feed(const LogLine&) override {}

  std::vector<LogFinding> Finish(const LogScanView& scan) const override {
    std::vector<LogFinding> findings;
    for (std::size_t s = 0; s < scan.Sources().size(); ++s) {
      const LogSourceInfo& source = scan.Sources()[s];
      const TransportVerdict& verdict = scan.Transport(s);
      if (verdict.kind != NcclTransportKind::Socket) continue;
      if (source.efa_requested == false) continue;  // sockets are all it has
      LogFinding finding{kEfaTcpFallback, s, source.name + ": " + verdict.why + ", not EFA", {}};
      for (const TransportLine& line : verdict.evidence) {
        finding.evidence.push_back({s, line.line, line.text});
      }
      findings.push_back(std::move(finding));
    }
    return findings;
  }
};

NCCLGUARD_REGISTER(EfaTcpFallbackLog);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
