// The kube layer's metrics in a registry of the test's own: requests by method and code, watch
// restarts, a work queue's depth, adds, retries and waits (a fake clock), leader status.
#include "kube/metrics.h"

#include <gtest/gtest.h>

#include <string>

#include "kube/work_queue.h"
#include "metrics/registry.h"

namespace ncclguard::kube {
namespace {

using namespace std::chrono_literals;

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

TEST(KubeMetrics, RequestsAreCountedByMethodAndCode) {
  prometheus::Registry registry;
  Metrics metrics(registry);
  metrics.CountRequest("GET", 200);
  metrics.CountRequest("GET", 200);
  metrics.CountRequest("PATCH", 409);
  metrics.CountRequest("POST", 0);
  const std::string text = metrics::Render(registry);
  EXPECT_TRUE(Has(text, R"(ncclguard_rest_client_requests_total{code="200",method="GET"} 2)"))
      << text;
  EXPECT_TRUE(Has(text, R"(ncclguard_rest_client_requests_total{code="409",method="PATCH"} 1)"));
  EXPECT_TRUE(Has(text, R"(ncclguard_rest_client_requests_total{code="<error>",method="POST"} 1)"));
}

TEST(KubeMetrics, WatchRestartsAreCountedByResourceAndReason) {
  prometheus::Registry registry;
  Metrics metrics(registry);
  metrics.CountWatchRestart("pods", WatchRestart::kClosed);
  metrics.CountWatchRestart("pods", WatchRestart::kExpired);
  metrics.CountWatchRestart("pods", WatchRestart::kExpired);
  metrics.CountWatchRestart("nodevalidations", WatchRestart::kError);
  const std::string text = metrics::Render(registry);
  EXPECT_TRUE(Has(text, R"(ncclguard_watch_restarts_total{reason="closed",resource="pods"} 1)"));
  EXPECT_TRUE(Has(text, R"(ncclguard_watch_restarts_total{reason="expired",resource="pods"} 2)"));
  EXPECT_TRUE(
      Has(text, R"(ncclguard_watch_restarts_total{reason="error",resource="nodevalidations"} 1)"));
}

TEST(KubeMetrics, AStartedWatchHasItsRestartSeriesFromZero) {
  prometheus::Registry registry;
  Metrics metrics(registry);
  metrics.WatchStarted("pods");
  metrics.WatchStarted("pods");  // a second informer of the same resource: the same series
  metrics.CountWatchRestart("pods", WatchRestart::kClosed);
  const std::string text = metrics::Render(registry);
  EXPECT_TRUE(Has(text, R"(ncclguard_watch_restarts_total{reason="closed",resource="pods"} 1)"));
  EXPECT_TRUE(Has(text, R"(ncclguard_watch_restarts_total{reason="expired",resource="pods"} 0)"));
  EXPECT_TRUE(Has(text, R"(ncclguard_watch_restarts_total{reason="error",resource="pods"} 0)"));
}

TEST(KubeMetrics, AWorkQueueReportsDepthAddsRetriesAndWaits) {
  prometheus::Registry registry;
  Metrics metrics(registry);
  WorkQueue::Clock::time_point now{};
  WorkQueueOptions options;
  options.metrics = metrics.Queue("trainingjob");
  WorkQueue queue(options, [&now] { return now; });
  const auto render = [&registry] { return metrics::Render(registry); };
  const std::string depth = R"(ncclguard_workqueue_depth{name="trainingjob"} )";
  const std::string adds = R"(ncclguard_workqueue_adds_total{name="trainingjob"} )";

  queue.Add("a");
  queue.Add("b");
  queue.Add("a");  // waiting already: not added again
  EXPECT_TRUE(Has(render(), depth + "2"));
  EXPECT_TRUE(Has(render(), adds + "2"));

  now += 2s;  // "a" waited 2 s
  ASSERT_EQ(queue.TryGet(), "a");
  EXPECT_TRUE(Has(render(), depth + "1"));
  queue.Add("a");  // changed while a worker holds it: waits for Done
  EXPECT_TRUE(Has(render(), depth + "2"));
  now += 30ms;  // worked on for 30 ms
  queue.Done("a");
  EXPECT_TRUE(Has(render(), depth + "2"));

  const std::string waits = "ncclguard_workqueue_queue_duration_seconds";
  const std::string work = "ncclguard_workqueue_work_duration_seconds";
  std::string text = render();
  EXPECT_TRUE(Has(text, waits + R"(_count{name="trainingjob"} 1)")) << text;
  EXPECT_TRUE(Has(text, waits + R"(_sum{name="trainingjob"} 2)")) << text;
  EXPECT_TRUE(Has(text, waits + R"(_bucket{name="trainingjob",le="1"} 0)")) << text;
  EXPECT_TRUE(Has(text, waits + R"(_bucket{name="trainingjob",le="10"} 1)")) << text;
  EXPECT_TRUE(Has(text, work + R"(_count{name="trainingjob"} 1)")) << text;
  EXPECT_TRUE(Has(text, work + R"(_bucket{name="trainingjob",le="0.01"} 0)")) << text;
  EXPECT_TRUE(Has(text, work + R"(_bucket{name="trainingjob",le="0.1"} 1)")) << text;

  queue.AddRateLimited("c");
  queue.AddRateLimited("c");
  EXPECT_TRUE(Has(render(), R"(ncclguard_workqueue_retries_total{name="trainingjob"} 2)"));

  queue.ShutDown();
  EXPECT_TRUE(Has(render(), depth + "0"));
}

TEST(KubeMetrics, AQueueWithoutMetricsRecordsNothing) {
  WorkQueue queue;
  queue.Add("a");
  ASSERT_EQ(queue.TryGet(), "a");
  queue.Done("a");
  queue.Done("a");  // not handed out any more: ignored
  EXPECT_EQ(queue.TryGet(), std::nullopt);
}

TEST(KubeMetrics, LeaderStatusIsOneGaugePerLease) {
  prometheus::Registry registry;
  Metrics metrics(registry);
  metrics.LeaderStatus("ncclguard-controller").Set(1);
  EXPECT_TRUE(Has(metrics::Render(registry),
                  R"(ncclguard_leader_election_master_status{name="ncclguard-controller"} 1)"));
  EXPECT_EQ(&metrics.LeaderStatus("ncclguard-controller"),
            &metrics.LeaderStatus("ncclguard-controller"));
}

}  // namespace
}  // namespace ncclguard::kube
