// What the controller reads of training pods' logs (docs/operator.md "Pod logs"): a bounded tail
// per container, scanned by the log diagnoses (controllers/log_scan.h), of which only the verdict
// and the matched lines are kept. When to read is decided here, without clocks or I/O; manager/
// does the reading.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "controllers/log_scan.h"
#include "controllers/timestamps.h"
#include "core/json.h"

namespace ncclguard::controllers {

// The tail read: the API server's tailLines and limitBytes (<= 64 KiB).
inline constexpr std::int64_t kPodLogTailLines = 2000;
inline constexpr std::int64_t kPodLogLimitBytes = 64 * 1024;

// What one container's log tail showed. No log content beyond the matched, redacted lines.
struct PodLogDigest {
  std::string subject;  // "P container C"
  std::string container;
  std::string phase;  // the pod's phase when read
  TransportVerdict transport;
  std::vector<LogFinding> findings;  // sources: 0 = this container
};

// A container's log tail, scanned. `subject` names it in messages ("P container C").
PodLogDigest DigestPodLog(std::string_view subject, std::string_view container,
                          std::string_view phase, bool efa_requested, std::string_view log_tail);

// A later read of a container keeps what an earlier one found that the tail no longer shows (the
// NCCL init lines scroll out of a long-running pod's tail): a transport verdict once known, and
// each diagnosis' first finding.
PodLogDigest MergeDigests(const PodLogDigest& earlier, PodLogDigest later);

// The containers of a pod whose logs are read, and whether each requested EFA devices.
struct LogContainer {
  std::string name;
  bool efa_requested = false;
};
std::vector<LogContainer> LogContainers(const core::Json& pod);
std::string PodPhase(const core::Json& pod);

// When to read a pod's logs: once per phase it reaches (Running, Succeeded, Failed), again every
// `running_interval` while Running, and never more than `rate` reads per second across all pods
// (a token bucket of `burst`). Pods not yet started (Pending, no phase) are never read.
struct LogReadLimits {
  std::chrono::seconds running_interval{300};
  double rate = 2.0;  // reads per second, all pods together
  double burst = 10.0;
};

class LogReadPlanner {
 public:
  explicit LogReadPlanner(LogReadLimits limits) : limits_(limits), tokens_(limits.burst) {}

  // Whether `pod` ("namespace/name") in `phase` is due for a read at `now`, ignoring the rate.
  bool Due(const std::string& pod, std::string_view phase, Timestamp now) const;
  // Takes a token of the global rate if one is left at `now` (tokens refill continuously).
  bool TakeToken(Timestamp now);
  // Records a read of `pod` in `phase` at `now`.
  void Read(const std::string& pod, std::string_view phase, Timestamp now);
  // Forgets every pod `live` says is gone (deleted pods).
  void Retain(const std::function<bool(const std::string& pod)>& live);
  std::size_t Tracked() const { return reads_.size(); }

 private:
  struct LastRead {
    std::string phase;
    Timestamp at;
  };
  LogReadLimits limits_;
  double tokens_;
  std::optional<Timestamp> refilled_;
  std::map<std::string, LastRead, std::less<>> reads_;
};

}  // namespace ncclguard::controllers
