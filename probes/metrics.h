// The probe's metrics (docs/operator.md, "Metrics", "Probe"): what the last run of the checks
// found on this node, so that Prometheus sees it before the controller does, and how publishing
// the reports went. In the process's registry (metrics::Global()) unless a test gives its own.
// Thread-safe: the publisher records while /metrics renders.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "probes/check.h"
#include "probes/report.h"

namespace ncclguard::probes {

class ProbeMetrics {
 public:
  ProbeMetrics();  // in metrics::Global()
  explicit ProbeMetrics(prometheus::Registry& registry);
  ProbeMetrics(const ProbeMetrics&) = delete;
  ProbeMetrics& operator=(const ProbeMetrics&) = delete;

  // A finished run: each check's status and duration, the node and its instance type, and
  // `finished`. A check's series of its former status goes, as do the series of a check the
  // run no longer has and the node info of a former instance type: a scrape shows this run only.
  void RecordRun(const ProbeReport& report, std::chrono::system_clock::time_point finished);

  // One attempt to write a run's report to the API server: written, or failed (retried).
  void CountPublication(bool published);

  // One test between nodes this probe ran as the client: tier "tcp" or "fabric", pass "ring" or
  // "culprit", passed or not, and how long it took.
  void RecordPeerTest(std::string_view tier, std::string_view pass, bool passed, double seconds);
  // A finished round: its duration, when it finished, and this node's standing as its peers'
  // results say ("reachable", "unreachable", "pair-fault", "undecided", or "untested"). The
  // series of a former standing goes: a scrape shows the last round's only.
  // This node's standing alone, before its first round has ended ("untested", "alone").
  void SetPeerStanding(std::string_view standing);
  void RecordPeerRound(double seconds, std::chrono::system_clock::time_point finished,
                       std::string_view standing);

  // A finished round of RAS reads (probes/ras_watch.h): how long it took, each reader pod's
  // answer ("Answered", "TimedOut", "Waiting", ...) counted, and the reader pods by the health
  // RAS reported ("NotRead" for those it did not answer for); each health's series is there
  // from the start, 0 until a round sees one.
  void RecordRasRound(double seconds, const std::map<std::string, int>& answers,
                      const std::map<std::string, int>& health);

  // The buckets of ncclguard_probe_peer_test_duration_seconds: a test on a LAN takes a
  // millisecond or two, one that times out its --timeout (2 s by default).
  static prometheus::Histogram::BucketBoundaries PeerTestBuckets();

 private:
  void SetStandingLocked(std::string_view standing);  // mutex_ held

  struct CheckSeries {
    CheckStatus status = CheckStatus::Skip;
    prometheus::Gauge* status_gauge = nullptr;
    prometheus::Gauge* duration = nullptr;
  };

  prometheus::Family<prometheus::Gauge>& check_status_;
  prometheus::Family<prometheus::Gauge>& check_duration_;
  prometheus::Family<prometheus::Gauge>& node_info_;
  prometheus::Gauge& last_run_;
  prometheus::Counter& published_;
  prometheus::Counter& failed_;
  prometheus::Family<prometheus::Counter>& peer_tests_;
  prometheus::Family<prometheus::Histogram>& peer_test_duration_;
  prometheus::Gauge& peer_round_duration_;
  prometheus::Gauge& peer_last_round_;
  prometheus::Family<prometheus::Gauge>& peer_standing_;
  prometheus::Family<prometheus::Counter>& ras_reads_;
  prometheus::Gauge& ras_round_duration_;
  prometheus::Family<prometheus::Gauge>& ras_pods_;
  std::map<std::string, prometheus::Gauge*> ras_pod_series_;

  std::mutex mutex_;  // what follows: the series made so far, to remove when they change
  std::map<std::string, CheckSeries, std::less<>> checks_;
  prometheus::Gauge* node_info_series_ = nullptr;
  std::string node_;
  std::string instance_type_;
  prometheus::Gauge* standing_series_ = nullptr;
  std::string standing_;
};

}  // namespace ncclguard::probes
