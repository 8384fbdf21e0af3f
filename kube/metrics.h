// The kube layer's metrics, client-go's and controller-runtime's names with the prefix
// ncclguard_ (docs/operator.md "Metrics"): every request a Client sends, informers' watch
// restarts, work queues and leader election. Families live in a prometheus-cpp registry, the
// process's (metrics::Global()) unless a test gives its own; the series of a label set are made
// once and kept, so recording never builds a label map. Thread-safe.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "metrics/registry.h"

namespace ncclguard::kube {

// The series of one work queue (label `name`); a null pointer records nothing.
struct WorkQueueMetrics {
  prometheus::Gauge* depth = nullptr;
  prometheus::Counter* adds = nullptr;
  prometheus::Counter* retries = nullptr;
  prometheus::Histogram* queue_duration = nullptr;  // added -> handed to a worker
  prometheus::Histogram* work_duration = nullptr;   // handed out -> Done
};

// Why an informer started its watch again.
enum class WatchRestart {
  kClosed,   // the server ended the watch (its timeout) or closed the stream
  kExpired,  // 410 Gone: the resourceVersion is too old, listed again
  kError,    // the watch failed (transport, an unreadable stream, an error status)
};

class Metrics {
 public:
  // Bounds of the work queues' duration histograms, in seconds: 100 us to 1000 s.
  static prometheus::Histogram::BucketBoundaries QueueBuckets();

  // The families in metrics::Global(), made once.
  static Metrics& Process();
  explicit Metrics(prometheus::Registry& registry);
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // One request sent with HTTP `method`, answered with `status` (0: no response, "<error>").
  void CountRequest(std::string_view method, long status);
  // An informer's watch of `resource` (the plural) started again after it ended.
  void CountWatchRestart(std::string_view resource, WatchRestart reason);
  // An informer of `resource` runs: its restart series exist from 0 (a rate() and the docs'
  // "every family has series" need them before the first restart).
  void WatchStarted(std::string_view resource);
  // The series of the work queue `name` (the controller's name).
  WorkQueueMetrics Queue(const std::string& name);
  // ncclguard_leader_election_master_status of the lease `name`: 1 while this replica holds it.
  prometheus::Gauge& LeaderStatus(const std::string& name);
  // What the informers of `resource` hold: objects, and their stored bytes (keys and packed
  // objects). Informers of one resource add into the same two series.
  struct CacheSeries {
    prometheus::Gauge* objects = nullptr;
    prometheus::Gauge* bytes = nullptr;
  };
  CacheSeries Cache(std::string_view resource);

 private:
  prometheus::Counter& RestartSeries(std::string_view resource, std::string_view why);

  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Counter>& watch_restarts_;
  prometheus::Family<prometheus::Gauge>& queue_depth_;
  prometheus::Family<prometheus::Counter>& queue_adds_;
  prometheus::Family<prometheus::Counter>& queue_retries_;
  prometheus::Family<prometheus::Histogram>& queue_duration_;
  prometheus::Family<prometheus::Histogram>& work_duration_;
  prometheus::Family<prometheus::Gauge>& leader_status_;
  prometheus::Family<prometheus::Gauge>& cache_objects_;
  prometheus::Family<prometheus::Gauge>& cache_bytes_;

  std::mutex mutex_;  // the caches below
  std::map<std::pair<std::string, long>, prometheus::Counter*, metrics::ViewPairLess<long>>
      request_series_;
  std::map<std::pair<std::string, std::string>, prometheus::Counter*, metrics::ViewPairLess<>>
      restart_series_;
};

}  // namespace ncclguard::kube
