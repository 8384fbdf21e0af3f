#include <map>
#include <set>

#include "controllers/diagnoses/log_lines.h"
#include "controllers/diagnosis.h"

namespace ncclguard::controllers::diagnoses {
namespace {

constexpr std::string_view kNcclVersionMismatch = "nccl-version-mismatch";
constexpr std::size_t kMaxVersions = 8;
constexpr std::size_t kMaxWhere = 3;
constexpr std::size_t kMaxCounted = 4096;

class NcclVersionMismatch final : public Diagnosis {
 public:
  NcclVersionMismatch()
      : Diagnosis(
            {kNcclVersionMismatch, "nccl-version", 35,
             "The job's logs print different \"NCCL version 2.x.y\" lines across ranks (each "
             "rank 0 in NCCL 2.18-2.22, every process from 2.23, and PyTorch's NCCL errors), "
             "or NCCL's own \"Mismatched NCCL version detected\".",
             "Run every rank from the same image (pinned by digest) so that all load the same "
             "libnccl; check LD_LIBRARY_PATH and NCCL_NET_PLUGIN for a second copy."}) {}

  std::vector<std::string> Find(const DiagnosisContext&) const override { return {}; }
};

NCCLGUARD_REGISTER(NcclVersionMismatch);

// "2.18.5" from "NCCL version 2.18.5+cuda12.2", "NCCL version: 2.20.5", "..., NCCL version 2.19.3".
std::string VersionIn(std::string_view text) {
  const auto at = text.find("NCCL version");
  if (at == std::string_view::npos) return "";
  std::size_t i = at + 12;
  while (i < text.size() && (text[i] == ':' || text[i] == ' ')) ++i;
  std::string version;
  int dots = 0;
  while (i < text.size() && version.size() < 16) {
    const char c = text[i];
    if (c >= '0' && c <= '9') {
      version += c;
    } else if (c == '.' && !version.empty() && version.back() != '.' && dots < 2) {
      version += c;
      ++dots;
    } else {
      break;
    }
    ++i;
  }
  if (dots != 2 || version.back() == '.') return "";
  return version;
}

class NcclVersionMismatchLog final : public LogMatcher {
 public:
  static constexpr std::string_view kDiagnosis = kNcclVersionMismatch;
  void Feed(const LogLine& line) override {
    if (line.text.find("NCCL version") == std::string_view::npos &&
        line.text.find("Mismatched NCCL") == std::string_view::npos) {
      return;
    }
    if (LogContains(line.text, "Mismatched NCCL version detected")) {
      detected_.Add(line);
      return;
    }
    const std::string version = VersionIn(line.text);
    if (version.empty()) return;
    auto it = versions_.find(version);
    if (it == versions_.end()) {
      if (versions_.size() >= kMaxVersions) return;
      it = versions_
               .emplace(version, Seen{{line.source, line.number, RedactLine(line.text)}, {}, {}, 0})
               .first;
    }
    Seen& seen = it->second;
    if (seen.where.contains(line.source)) return;
    if (seen.where.size() < kMaxWhere) {
      seen.where.emplace(line.source, LogValue(NcclProcess(line.text)));
    } else if (seen.counted.size() < kMaxCounted && seen.counted.insert(line.source).second) {
      ++seen.more;
    }
  }

  std::vector<LogFinding> Finish(const LogScanView& scan) const override {
    std::vector<LogFinding> findings;
    if (versions_.size() >= 2) {
      std::string message = "ranks run different NCCL versions:";
      LogFinding finding{kNcclVersionMismatch, versions_.begin()->second.first.source, "", {}};
      bool first = true;
      for (const auto& [version, seen] : versions_) {
        message += std::string(first ? " " : "; ") + version + " in ";
        first = false;
        bool first_where = true;
        for (const auto& [source, process] : seen.where) {
          message += std::string(first_where ? "" : ", ") + scan.Sources()[source].name +
                     (process.empty() ? "" : " (" + process + ")");
          first_where = false;
        }
        if (seen.more > 0) message += " and " + std::to_string(seen.more) + " more";
        finding.evidence.push_back(seen.first);
      }
      finding.message = std::move(message);
      findings.push_back(std::move(finding));
    }
    for (LogFinding& f : detected_.Findings(kNcclVersionMismatch, scan,
                                            "NCCL found ranks with different versions")) {
      findings.push_back(std::move(f));
    }
    return findings;
  }

 private:
  struct Seen {
    LogEvidence first;
    std::map<std::size_t, std::string> where;  // source -> host:pid, at most kMaxWhere
    std::set<std::size_t> counted;             // the sources beyond, at most kMaxCounted
    std::size_t more = 0;
  };
  std::map<std::string, Seen> versions_;
  MatchedLines detected_;
};

NCCLGUARD_REGISTER(NcclVersionMismatchLog);

}  // namespace
}  // namespace ncclguard::controllers::diagnoses
