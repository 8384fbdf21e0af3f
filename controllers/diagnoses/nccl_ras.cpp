// What NCCL's RAS service says of a job (guide section 9; core/ras.h): the reports an engineer
// saved (`ncclras`, `echo verbose status | nc localhost 28028`, `ncclras -f json`, a loop of
// queries in one file) read as logs are. In the cluster the probe reads RAS while the job runs
// and the controller says what it saw in the job's NcclHealth condition
// (controllers/nccl_health.h), so these diagnoses find nothing in a job's state.
#include <map>

#include "controllers/diagnosis.h"
#include "controllers/log_scan.h"
#include "core/ras.h"

namespace ncclguard::controllers::diagnoses {
namespace {

constexpr std::string_view kProcessDead = "ras-process-dead";
constexpr std::string_view kRankError = "ras-rank-error";
constexpr std::string_view kCollectiveStuck = "ras-collective-stuck";
constexpr std::string_view kRankUnresponsive = "ras-rank-unresponsive";

class RasDiagnosis : public Diagnosis {
 public:
  using Diagnosis::Diagnosis;
  std::vector<std::string> Find(const DiagnosisContext&) const override { return {}; }
};

class RasProcessDead final : public RasDiagnosis {
 public:
  RasProcessDead()
      : RasDiagnosis({kProcessDead, "nccl-ras", 34,
                      "NCCL's RAS report lists a process under DEAD: unreachable over the RAS "
                      "network for 60 seconds (its pod, container or node died or hangs hard).",
                      "Read that rank's pod (its last log lines, its termination reason) and "
                      "its node's health (section 7): the job cannot finish without it; restart "
                      "it from a checkpoint once the node is healthy."}) {}
};
NCCLGUARD_REGISTER(RasProcessDead);

class RasRankError final : public RasDiagnosis {
 public:
  RasRankError()
      : RasDiagnosis({kRankError, "nccl-ras", 35,
                      "NCCL's RAS report lists a communicator under ERROR: a rank reported an "
                      "initialization or asynchronous error (ncclSystemError, ncclRemoteError, "
                      "...).",
                      "Read the NCCL WARN lines of the ranks it names: the error names the "
                      "transport or peer that failed."}) {}
};
NCCLGUARD_REGISTER(RasRankError);

class RasCollectiveStuck final : public RasDiagnosis {
 public:
  RasCollectiveStuck()
      : RasDiagnosis({kCollectiveStuck, "nccl-ras", 36,
                      "Two RAS reports in a row show the same MISMATCH of collective operation "
                      "counts: the ranks behind have not moved, the others wait for them (a "
                      "mismatch whose counts move is a straggler, not a hang).",
                      "Look at what the ranks behind are doing (py-spy dump, their last log "
                      "lines): data loading, a checkpoint, a Python-side deadlock or another code "
                      "path (section 18)."}) {}
};
NCCLGUARD_REGISTER(RasCollectiveStuck);

class RasRankUnresponsive final : public RasDiagnosis {
 public:
  RasRankUnresponsive()
      : RasDiagnosis({kRankUnresponsive, "nccl-ras", 37,
                      "NCCL's RAS report says INCOMPLETE: processes or ranks sent no data to the "
                      "query (not yet considered dead; RAS declares them dead after 60 seconds).",
                      "Query again in a minute: still missing means the process hangs or its "
                      "node is unreachable (sections 7 and 16)."}) {}
};
NCCLGUARD_REGISTER(RasRankUnresponsive);

std::string_view IdOf(core::RasHealth health) {
  switch (health) {
    case core::RasHealth::ProcessDead:
      return kProcessDead;
    case core::RasHealth::RankError:
      return kRankError;
    case core::RasHealth::CollectiveStuck:
      return kCollectiveStuck;
    case core::RasHealth::RankUnresponsive:
      return kRankUnresponsive;
    case core::RasHealth::Healthy:
      break;
  }
  return {};
}

// Every RAS report in each log, judged against the one before it in the same log: a finding for
// each kind of trouble seen, from the latest report that showed it.
class RasReportLog final : public LogMatcher {
 public:
  static constexpr std::string_view kDiagnosis = kProcessDead;

  void Feed(const LogLine& line) override {
    if (line.source >= readers_.size()) {
      readers_.resize(line.source + 1);
      start_lines_.resize(line.source + 1);
    }
    if (!readers_[line.source].Feed(line.text)) return;
    // The line a report starts on is its evidence: kept redacted, the newest kept.
    auto& starts = start_lines_[line.source];
    starts.emplace(line.number, RedactLine(line.text));
    if (starts.size() > kKeptStartLines) starts.erase(starts.begin());
  }

  std::vector<LogFinding> Finish(const LogScanView& scan) const override {
    std::vector<LogFinding> findings;
    for (std::size_t source = 0; source < readers_.size(); ++source) {
      core::RasReader& reader = readers_[source];
      const std::vector<core::RasReport> reports = reader.Finish();
      const std::vector<std::uint64_t>& starts = reader.StartLines();
      std::map<std::string_view, LogFinding> latest;
      for (std::size_t i = 0; i < reports.size(); ++i) {
        const core::RasReport* previous = i > 0 ? &reports[i - 1] : nullptr;
        const core::RasVerdict verdict = core::JudgeRas(reports[i], previous);
        const std::string_view id = IdOf(verdict.health);
        if (id.empty()) continue;
        std::string where = "RAS report at line " + std::to_string(starts[i]);
        if (verdict.health == core::RasHealth::CollectiveStuck) {
          where = "RAS reports at lines " + std::to_string(starts[i - 1]) + " and " +
                  std::to_string(starts[i]);
        }
        const std::string version = reports[i].nccl_version.empty()
                                        ? std::string()
                                        : " (NCCL " + reports[i].nccl_version + ")";
        LogFinding finding{id,
                           source,
                           scan.Sources()[source].name + ", " + where + version + ": " +
                               BoundedSummary(verdict.summary),
                           {}};
        const auto evidence = [&](std::uint64_t at) {
          const auto kept = start_lines_[source].find(at);
          if (kept != start_lines_[source].end()) {
            finding.evidence.push_back({source, at, kept->second});
          }
        };
        if (verdict.health == core::RasHealth::CollectiveStuck) evidence(starts[i - 1]);
        evidence(starts[i]);
        latest.insert_or_assign(id, std::move(finding));
      }
      for (auto& [id, finding] : latest) findings.push_back(std::move(finding));
    }
    return findings;
  }

 private:
  // A verdict's summary names ranks by number, GPU, PID and address only, which are the report's
  // own bounded values; control bytes were replaced when it was read.
  static std::string BoundedSummary(const std::string& summary) {
    return summary.size() <= kMaxEvidenceBytes ? summary
                                               : summary.substr(0, kMaxEvidenceBytes - 3) + "...";
  }

  // More than the reader keeps reports (core::kMaxRasReports): starts of what was no report too.
  static constexpr std::size_t kKeptStartLines = 4 * core::kMaxRasReports;
  mutable std::vector<core::RasReader> readers_;
  std::vector<std::map<std::uint64_t, std::string>> start_lines_;  // by source: line -> text
};
NCCLGUARD_REGISTER(RasReportLog);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
