// Diagnoses from what NCCL, libfabric and PyTorch print: training logs are read line by line
// (a file of `ncclguard diagnose`, the tail of a pod's log in the controller) and every log
// matcher sees each line once. A matcher keeps bounded state (counts, the first few matched
// lines), so a 10 GB log is read in bounded memory. Nothing of a log is kept but the lines a
// matcher matched, redacted (RedactLine).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "controllers/log_transport.h"
#include "core/registry.h"

namespace ncclguard::controllers {

// Lines longer than this are cut (the rest of the line is skipped, not buffered).
inline constexpr std::size_t kMaxLogLineBytes = 64 * 1024;
// A matched line as kept in evidence, at most.
inline constexpr std::size_t kMaxEvidenceBytes = 400;
// A value a message quotes from a log (LogValue), at most: an Event's note is cut at 1 KiB and
// a message may quote a few.
inline constexpr std::size_t kMaxLogValueBytes = 128;

// One log being read.
struct LogSourceInfo {
  std::string name;  // a file name; "pod P container C" in the controller
  // Whether the pod requested EFA devices: known in the cluster, not for a file (nullopt: assume
  // it did, since ncclguard diagnoses EFA clusters).
  std::optional<bool> efa_requested;
};

struct LogLine {
  std::size_t source;     // index into the scan's sources
  std::uint64_t number;   // 1-based within its source
  std::string_view text;  // without the line end
};

struct LogEvidence {
  std::size_t source;
  std::uint64_t line;
  std::string text;  // the matched line, redacted and bounded
};

struct LogFinding {
  std::string_view id;  // the diagnosis (controllers/diagnoses/, core::Catalog)
  std::size_t source;   // the source it is mostly about (its first evidence)
  std::string message;  // what was seen, one sentence (names sources; log content only as LogValue)
  std::vector<LogEvidence> evidence;
};

// What a matcher reads at the end of the scan besides its own state.
class LogScanView {
 public:
  virtual ~LogScanView() = default;
  virtual std::span<const LogSourceInfo> Sources() const = 0;
  virtual const TransportVerdict& Transport(std::size_t source) const = 0;
};

struct LogMatcherEntry;

// One diagnosis' reading of logs; a fresh instance per scan. A matcher class names the diagnosis
// it finds as `static constexpr std::string_view kDiagnosis` and registers itself with
// NCCLGUARD_REGISTER(MyLog), which registers a factory for it in LogMatcherRegistry.
class LogMatcher {
 public:
  using RegistryEntry = LogMatcherEntry;
  virtual ~LogMatcher() = default;
  virtual void Feed(const LogLine& line) = 0;
  virtual std::vector<LogFinding> Finish(const LogScanView& scan) const = 0;
};

struct LogMatcherEntry {
  std::string_view id;  // the diagnosis it finds
  std::unique_ptr<LogMatcher> (*make)();
};

// By diagnosis id, one matcher each; Scan sorts findings by the diagnoses' rank.
using LogMatcherRegistry = core::Registry<LogMatcherEntry>;

// One scan over one or more sources, fed line by line (in any interleaving of sources).
class LogScan final : public LogScanView {
 public:
  LogScan();
  ~LogScan() override;
  LogScan(const LogScan&) = delete;
  LogScan& operator=(const LogScan&) = delete;

  std::size_t AddSource(LogSourceInfo info);
  // The next line of `source` (numbered here), without its line end; cut at kMaxLogLineBytes.
  void Feed(std::size_t source, std::string_view line);
  // Every finding, in the diagnoses' rank order, then by source.
  std::vector<LogFinding> Finish() const;

  std::span<const LogSourceInfo> Sources() const override { return sources_; }
  const TransportVerdict& Transport(std::size_t source) const override;
  std::uint64_t Lines(std::size_t source) const { return lines_[source]; }

 private:
  std::vector<LogSourceInfo> sources_;
  std::vector<std::uint64_t> lines_;
  std::vector<TransportReader> transports_;
  std::vector<std::unique_ptr<LogMatcher>> matchers_;
};

// Splits a byte stream into lines (\n, \r\n) in bounded memory: a line longer than
// kMaxLogLineBytes is cut there and the rest of it dropped.
class LineSplitter {
 public:
  template <typename OnLine>
  void Push(std::string_view chunk, OnLine&& on_line) {
    while (!chunk.empty()) {
      const auto end = chunk.find('\n');
      if (end == std::string_view::npos) {
        Append(chunk);
        return;
      }
      if (pending_.empty() && !cut_) {
        // The whole line is in this chunk: no copy.
        on_line(Strip(chunk.substr(0, std::min(end, kMaxLogLineBytes))));
      } else {
        Append(chunk.substr(0, end));
        on_line(Strip(pending_));
        Reset();
      }
      chunk.remove_prefix(end + 1);
    }
  }
  // The last line when the stream does not end with a line end.
  template <typename OnLine>
  void Finish(OnLine&& on_line) {
    if (!pending_.empty() || cut_) on_line(Strip(pending_));
    Reset();
  }

 private:
  void Append(std::string_view part);
  static std::string_view Strip(std::string_view line) {
    return !line.empty() && line.back() == '\r' ? line.substr(0, line.size() - 1) : line;
  }
  void Reset() {
    pending_.clear();
    cut_ = false;
  }
  std::string pending_;
  bool cut_ = false;
};

// The line with what looks like a secret replaced by "<redacted>": the value of KEY=VALUE or
// KEY: VALUE where KEY names a token, secret, password, credential or key; Bearer/Basic
// credentials; AWS access key ids; GitHub and Hugging Face tokens. A tab becomes a space and
// any other control byte "?", so that none reaches a terminal, an Event or a condition raw. Cut
// to kMaxEvidenceBytes with "...".
std::string RedactLine(std::string_view line);
// A value a message quotes from a log (a provider's name, "host:pid", a peer's address): as
// RedactLine, cut to kMaxLogValueBytes. Every such value goes through it.
std::string LogValue(std::string_view value);
// NUL to U+001F and DEL: what no name in a log holds (a log file cut while it was written holds
// NULs).
inline bool IsControlByte(char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }

// Helpers for matchers.
bool LogContains(std::string_view text, std::string_view needle);
bool LogContainsNoCase(std::string_view text, std::string_view needle);
// The process that printed an NCCL line ("host:pid" from "host:pid:tid [dev] NCCL ..."), or "".
std::string_view NcclProcess(std::string_view text);
// The rank a line names: "[rank3]:", "[Rank 3]", "[default3]:", "[PG 0 Rank 3]", "rank: 3".
std::optional<int> RankOf(std::string_view text);

}  // namespace ncclguard::controllers

namespace ncclguard::core {

template <>
struct RegistryTraits<controllers::LogMatcherEntry> {
  static constexpr std::string_view kKind = "log matcher";
  static std::string_view Id(const controllers::LogMatcherEntry& entry) { return entry.id; }
  template <typename Matcher>
  static std::unique_ptr<controllers::LogMatcherEntry> Make() {
    return std::make_unique<controllers::LogMatcherEntry>(controllers::LogMatcherEntry{
        Matcher::kDiagnosis,
        []() -> std::unique_ptr<controllers::LogMatcher> { return std::make_unique<Matcher>(); }});
  }
};

}  // namespace ncclguard::core
