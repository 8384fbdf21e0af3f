#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "controllers/log_scan.h"

namespace ncclguard::controllers::diagnoses {

// Matched lines of a log matcher, bounded: per source the first `kept` lines and a count.
class MatchedLines {
 public:
  explicit MatchedLines(std::size_t kept = 2) : kept_(kept) {}
  void Add(const LogLine& line);
  bool Any() const { return !sources_.empty(); }
  // One finding per source that matched: "<source>: <what>", its first lines as evidence.
  std::vector<LogFinding> Findings(std::string_view id, const LogScanView& scan,
                                   std::string_view what) const;

 private:
  struct Source {
    std::size_t source;
    std::uint64_t count = 0;
    std::vector<LogEvidence> lines;
  };
  std::size_t kept_;
  std::vector<Source> sources_;  // in first-match order
};

// A diagnosis seen in single lines: each line `Matches` is evidence.
class LineMatcher : public LogMatcher {
 public:
  LineMatcher(std::string_view id, std::string_view what) : id_(id), what_(what) {}
  void Feed(const LogLine& line) override {
    if (Matches(line.text)) matched_.Add(line);
  }
  std::vector<LogFinding> Finish(const LogScanView& scan) const override {
    return matched_.Findings(id_, scan, what_);
  }

 protected:
  virtual bool Matches(std::string_view text) const = 0;

 private:
  std::string_view id_;
  std::string_view what_;
  MatchedLines matched_;
};

}  // namespace ncclguard::controllers::diagnoses
