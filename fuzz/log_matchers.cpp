// Training logs: controllers::LineSplitter + controllers::LogScan, fed the way `ncclguard diagnose`
// and the controller's pod-log reader feed them (bytes in chunks split anywhere, lines of two
// sources interleaved). Nothing is caught: neither caller catches anything from a scan.
// Properties: the findings do not depend on where chunks split; every finding names a diagnosis
// of the registry whose guide section exists; evidence is bounded and is the redacted text of
// the line it points at.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "controllers/log_scan.h"
#include "core/catalog.h"
#include "fuzz/fuzz_support.h"

namespace {

using namespace ncclguard;
using controllers::LogFinding;
using controllers::LogScan;

struct Outcome {
  std::vector<std::string> findings;  // id, source, message and evidence, in order
  std::vector<std::uint64_t> lines;
};

Outcome Run(std::string_view log, std::size_t chunk) {
  LogScan scan;
  const std::size_t sources[2] = {scan.AddSource({"rank0.log", true}),
                                  scan.AddSource({"rank1.log", std::nullopt})};
  controllers::LineSplitter splitter;
  std::size_t next = 0;
  std::vector<std::string> lines_of[2];  // what each source was fed, for the evidence check
  const auto on_line = [&](std::string_view line) {
    // A line starting with '|' goes to the other source, so matchers see ranks interleaved.
    lines_of[next].emplace_back(line);
    scan.Feed(sources[next], line);
    if (!line.empty() && line.front() == '|') next ^= 1;
  };
  for (std::size_t at = 0; at < log.size(); at += chunk) {
    splitter.Push(log.substr(at, chunk), on_line);
  }
  splitter.Finish(on_line);

  Outcome outcome;
  for (const std::size_t s : sources) outcome.lines.push_back(scan.Lines(s));
  for (const LogFinding& f : scan.Finish()) {
    const core::CatalogEntry* entry = core::Catalog::Find(f.id);
    fuzz::Require(entry != nullptr, "every finding names a registered diagnosis",
                  std::string(f.id));
    fuzz::Require(core::IsGuideSlug(entry->slug), "every finding's guide section exists",
                  std::string(f.id));
    fuzz::Require(f.source < 2, "a finding is about a source that was read");
    std::string text = std::string(f.id) + "|" + std::to_string(f.source) + "|" + f.message;
    for (const auto& e : f.evidence) {
      fuzz::Require(e.source < 2 && e.line >= 1 && e.line <= scan.Lines(e.source),
                    "evidence points at a line that was read");
      fuzz::Require(e.text.size() <= controllers::kMaxEvidenceBytes, "evidence is bounded");
      // Matched as LogScan::Feed sees it: cut to the line limit, a CRLF line without its CR.
      std::string_view line = lines_of[e.source][e.line - 1];
      line = line.substr(0, controllers::kMaxLogLineBytes);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      fuzz::Require(e.text == controllers::RedactLine(line),
                    "evidence is the redacted text of the line it points at");
      text += "|" + std::to_string(e.source) + ":" + std::to_string(e.line) + ":" + e.text;
    }
    outcome.findings.push_back(std::move(text));
  }
  return outcome;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto input = fuzz::SplitInputOf(data, size);
  if (!input) return 0;
  const Outcome whole = Run(input->bytes, input->bytes.size() + 1);
  const Outcome split = Run(input->bytes, input->chunk);
  fuzz::Require(whole.lines == split.lines, "lines do not depend on where chunks split");
  fuzz::Require(whole.findings == split.findings, "findings do not depend on where chunks split");
  return 0;
}
