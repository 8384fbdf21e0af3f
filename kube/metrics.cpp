#include "kube/metrics.h"

#include "metrics/registry.h"

namespace ncclguard::kube {
namespace {

std::string_view RestartReasonName(WatchRestart reason) {
  switch (reason) {
    case WatchRestart::kClosed:
      return "closed";
    case WatchRestart::kExpired:
      return "expired";
    case WatchRestart::kError:
      return "error";
  }
  return "error";
}

}  // namespace

prometheus::Histogram::BucketBoundaries Metrics::QueueBuckets() {
  return metrics::ExponentialBuckets(0.0001, 10, 8);
}

Metrics& Metrics::Process() {
  static Metrics* process = new Metrics(metrics::Global());  // never destroyed: used until exit
  return *process;
}

Metrics::Metrics(prometheus::Registry& registry)
    : requests_(prometheus::BuildCounter()
                    .Name("ncclguard_rest_client_requests_total")
                    .Help("Requests to the Kubernetes API server by HTTP method and status code "
                          "(\"<error>\": no response).")
                    .Register(registry)),
      watch_restarts_(prometheus::BuildCounter()
                          .Name("ncclguard_watch_restarts_total")
                          .Help("Informer watches started again, by resource and why the last "
                                "one ended (closed, expired, error).")
                          .Register(registry)),
      queue_depth_(prometheus::BuildGauge()
                       .Name("ncclguard_workqueue_depth")
                       .Help("Keys waiting in the work queue for a worker.")
                       .Register(registry)),
      queue_adds_(prometheus::BuildCounter()
                      .Name("ncclguard_workqueue_adds_total")
                      .Help("Keys added to the work queue (a key already waiting is not added "
                            "again).")
                      .Register(registry)),
      queue_retries_(prometheus::BuildCounter()
                         .Name("ncclguard_workqueue_retries_total")
                         .Help("Keys added again with backoff after a failed reconcile.")
                         .Register(registry)),
      queue_duration_(prometheus::BuildHistogram()
                          .Name("ncclguard_workqueue_queue_duration_seconds")
                          .Help("Time a key waits in the work queue before a worker takes it.")
                          .Register(registry)),
      work_duration_(prometheus::BuildHistogram()
                         .Name("ncclguard_workqueue_work_duration_seconds")
                         .Help("Time a worker takes over a key, from taking it to Done.")
                         .Register(registry)),
      leader_status_(prometheus::BuildGauge()
                         .Name("ncclguard_leader_election_master_status")
                         .Help("1 while this replica holds the Lease, else 0.")
                         .Register(registry)),
      cache_objects_(prometheus::BuildGauge()
                         .Name("ncclguard_informer_objects")
                         .Help("Objects the informers of a resource hold in their caches.")
                         .Register(registry)),
      cache_bytes_(prometheus::BuildGauge()
                       .Name("ncclguard_informer_stored_bytes")
                       .Help("Bytes the informers of a resource store: keys and objects as "
                             "projected and packed, not the maps and indexes around them.")
                       .Register(registry)) {}

void Metrics::CountRequest(std::string_view method, long status) {
  prometheus::Counter* series = nullptr;
  {
    std::lock_guard lock(mutex_);
    auto it = request_series_.find(std::pair{method, status});
    if (it == request_series_.end()) {
      const std::string code = status > 0 ? std::to_string(status) : "<error>";
      it = request_series_
               .emplace(std::pair{std::string(method), status},
                        &requests_.Add({{"method", std::string(method)}, {"code", code}}))
               .first;
    }
    series = it->second;
  }
  series->Increment();
}

prometheus::Counter& Metrics::RestartSeries(std::string_view resource, std::string_view why) {
  std::lock_guard lock(mutex_);
  auto it = restart_series_.find(std::pair{resource, why});
  if (it == restart_series_.end()) {
    it = restart_series_
             .emplace(std::pair{std::string(resource), std::string(why)},
                      &watch_restarts_.Add(
                          {{"resource", std::string(resource)}, {"reason", std::string(why)}}))
             .first;
  }
  return *it->second;
}

void Metrics::CountWatchRestart(std::string_view resource, WatchRestart reason) {
  RestartSeries(resource, RestartReasonName(reason)).Increment();
}

void Metrics::WatchStarted(std::string_view resource) {
  for (WatchRestart reason :
       {WatchRestart::kClosed, WatchRestart::kExpired, WatchRestart::kError}) {
    RestartSeries(resource, RestartReasonName(reason));
  }
}

WorkQueueMetrics Metrics::Queue(const std::string& name) {
  const prometheus::Labels labels{{"name", name}};
  return {&queue_depth_.Add(labels), &queue_adds_.Add(labels), &queue_retries_.Add(labels),
          &queue_duration_.Add(labels, QueueBuckets()),
          &work_duration_.Add(labels, QueueBuckets())};
}

prometheus::Gauge& Metrics::LeaderStatus(const std::string& name) {
  return leader_status_.Add({{"name", name}});
}

Metrics::CacheSeries Metrics::Cache(std::string_view resource) {
  const prometheus::Labels labels{{"resource", std::string(resource)}};
  return {&cache_objects_.Add(labels), &cache_bytes_.Add(labels)};
}

}  // namespace ncclguard::kube
