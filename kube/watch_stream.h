// The watch response body: one JSON event per line, {"type": ..., "object": {...}}, arriving
// in chunks that split lines anywhere. Pure: no I/O, unit-tested with garbage and huge lines.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "core/json.h"
#include "kube/errors.h"

namespace ncclguard::kube {

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };

const char* WatchEventTypeName(WatchEventType type);

struct WatchEvent {
  WatchEventType type;
  core::Json object;  // for kError, the Status
};

class WatchStreamParser {
 public:
  // A line longer than this is an error (API objects are at most ~1.5 MiB in etcd).
  explicit WatchStreamParser(std::size_t max_line_bytes = 16u << 20);

  // Feeds the next chunk and hands each complete event to `on_event`. Throws
  // ApiError(kDecode) naming the problem for a line that is not a watch event; the parser
  // is then unusable (the caller resyncs with a new watch).
  void Feed(std::string_view chunk, const std::function<void(WatchEvent&&)>& on_event);

  // The stream ended: a partial last line is an error (the connection broke mid-event).
  void Finish() const;

  std::size_t buffered_bytes() const { return pending_.size(); }

 private:
  void ParseLine(std::string_view line, const std::function<void(WatchEvent&&)>& on_event);

  std::size_t max_line_bytes_;
  std::string pending_;
  std::size_t lines_ = 0;
};

// Parses one event line (exposed for tests and for ERROR handling).
WatchEvent ParseWatchEvent(std::string_view line);

}  // namespace ncclguard::kube
