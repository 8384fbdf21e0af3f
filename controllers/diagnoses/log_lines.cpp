#include "controllers/diagnoses/log_lines.h"

#include <algorithm>

namespace ncclguard::controllers::diagnoses {

void MatchedLines::Add(const LogLine& line) {
  auto it = std::find_if(sources_.begin(), sources_.end(),
                         [&](const Source& s) { return s.source == line.source; });
  if (it == sources_.end()) {
    sources_.push_back({line.source, 0, {}});
    it = sources_.end() - 1;
  }
  ++it->count;
  if (it->lines.size() < kept_) {
    it->lines.push_back({line.source, line.number, RedactLine(line.text)});
  }
}

std::vector<LogFinding> MatchedLines::Findings(std::string_view id, const LogScanView& scan,
                                               std::string_view what) const {
  std::vector<LogFinding> findings;
  for (const Source& s : sources_) {
    std::string message = scan.Sources()[s.source].name + ": " + std::string(what);
    if (s.count > 1) message += " (" + std::to_string(s.count) + " lines)";
    findings.push_back({id, s.source, std::move(message), s.lines});
  }
  return findings;
}

}  // namespace ncclguard::controllers::diagnoses
