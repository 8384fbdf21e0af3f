#include "probes/metrics.h"

#include <chrono>
#include <set>

#include "metrics/registry.h"

namespace ncclguard::probes {
namespace {

prometheus::Family<prometheus::Gauge>& ProbeGaugeFamily(prometheus::Registry& registry,
                                                        const std::string& name,
                                                        const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}

prometheus::Family<prometheus::Counter>& ProbeRunsFamily(prometheus::Registry& registry) {
  return prometheus::BuildCounter()
      .Name("ncclguard_probe_runs_total")
      .Help(
          "Attempts to publish a run's report to the API server, by result: published, or "
          "failed (retried with backoff, each failed attempt counted).")
      .Register(registry);
}

// The tiers and passes the probe runs (probes/peer_tcp.h, probes/peer_fabric.h,
// core/peer_plan.h): their series start at 0, so that a first failure is an increase.
constexpr std::string_view kPeerTiers[] = {"tcp", "fabric"};
constexpr std::string_view kPeerPasses[] = {"ring", "culprit"};

double UnixSeconds(std::chrono::system_clock::time_point time) {
  return std::chrono::duration<double>(time.time_since_epoch()).count();
}

}  // namespace

ProbeMetrics::ProbeMetrics() : ProbeMetrics(metrics::Global()) {}

ProbeMetrics::ProbeMetrics(prometheus::Registry& registry)
    : check_status_(ProbeGaugeFamily(
          registry, "ncclguard_probe_check_status",
          "1 for the status (Pass, Warn, Fail, Skip) of each node check in the last run.")),
      check_duration_(ProbeGaugeFamily(registry, "ncclguard_probe_check_duration_seconds",
                                       "How long each node check took in the last run.")),
      node_info_(ProbeGaugeFamily(
          registry, "ncclguard_probe_node_info",
          "Always 1; the node this probe checks and the catalog instance type it resolved "
          "(empty when unknown).")),
      last_run_(ProbeGaugeFamily(registry, "ncclguard_probe_last_run_timestamp_seconds",
                                 "When the last run of the node checks finished, as a Unix time.")
                    .Add({})),
      published_(ProbeRunsFamily(registry).Add({{"result", "published"}})),
      failed_(ProbeRunsFamily(registry).Add({{"result", "failed"}})),
      peer_tests_(prometheus::BuildCounter()
                      .Name("ncclguard_probe_peer_tests_total")
                      .Help("Tests between nodes this probe ran as the client, by tier (tcp, "
                            "fabric), pass (ring, culprit) and result (passed, failed).")
                      .Register(registry)),
      peer_test_duration_(prometheus::BuildHistogram()
                              .Name("ncclguard_probe_peer_test_duration_seconds")
                              .Help("How long each test between nodes took, by tier.")
                              .Register(registry)),
      peer_round_duration_(ProbeGaugeFamily(registry, "ncclguard_probe_peer_round_duration_seconds",
                                            "How long the last round of tests between nodes took.")
                               .Add({})),
      peer_last_round_(ProbeGaugeFamily(registry,
                                        "ncclguard_probe_peer_last_round_timestamp_seconds",
                                        "When the last round of tests between nodes finished, as "
                                        "a Unix time.")
                           .Add({})),
      peer_standing_(ProbeGaugeFamily(
          registry, "ncclguard_probe_peer_standing",
          "1 for this node's standing after the last round of tests between nodes (reachable, "
          "unreachable, pair-fault, undecided, untested).")),
      ras_reads_(prometheus::BuildCounter()
                     .Name("ncclguard_probe_ras_reads_total")
                     .Help("RAS reads of the reader pods on this node, one a pod a round, by "
                           "answer (Answered, Refused, TimedOut, ProtocolError, TooLarge, "
                           "NamespaceError, SocketError; Waiting, Disabled, NoProcess, "
                           "Unreadable: not queried or no report).")
                     .Register(registry)),
      ras_round_duration_(ProbeGaugeFamily(registry, "ncclguard_probe_ras_round_duration_seconds",
                                           "How long the last round of RAS reads took.")
                              .Add({})),
      ras_pods_(ProbeGaugeFamily(registry, "ncclguard_probe_ras_pods",
                                 "The RAS reader pods on this node after the last round, by the "
                                 "health RAS reported (Healthy, ProcessDead, RankError, "
                                 "CollectiveStuck, RankUnresponsive; NotRead).")) {
  ras_reads_.Add({{"answer", "Answered"}});
  // A series for every health from the start (0 until a round sees it): a panel shows no gap.
  for (const char* health :
       {"Healthy", "ProcessDead", "RankError", "CollectiveStuck", "RankUnresponsive", "NotRead"}) {
    ras_pod_series_[health] = &ras_pods_.Add({{"health", health}});
  }
  for (const std::string_view tier : kPeerTiers) {
    peer_test_duration_.Add({{"tier", std::string(tier)}}, PeerTestBuckets());
    for (const std::string_view pass : kPeerPasses) {
      for (const char* result : {"passed", "failed"}) {
        peer_tests_.Add(
            {{"tier", std::string(tier)}, {"pass", std::string(pass)}, {"result", result}});
      }
    }
  }
}

prometheus::Histogram::BucketBoundaries ProbeMetrics::PeerTestBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
}

void ProbeMetrics::RecordRun(const ProbeReport& report,
                             std::chrono::system_clock::time_point finished) {
  const std::lock_guard lock(mutex_);
  std::set<std::string, std::less<>> seen;
  for (const CheckResult& check : report.checks) {
    seen.insert(check.id);
    CheckSeries& series = checks_[check.id];
    if (series.status_gauge != nullptr && series.status != check.status) {
      check_status_.Remove(series.status_gauge);
      series.status_gauge = nullptr;
    }
    if (series.status_gauge == nullptr) {
      series.status = check.status;
      series.status_gauge = &check_status_.Add(
          {{"check", check.id}, {"status", std::string(StatusName(check.status))}});
      series.status_gauge->Set(1);
    }
    if (series.duration == nullptr) series.duration = &check_duration_.Add({{"check", check.id}});
    series.duration->Set(std::chrono::duration<double>(check.duration).count());
  }
  for (auto it = checks_.begin(); it != checks_.end();) {
    if (seen.contains(it->first)) {
      ++it;
      continue;
    }
    check_status_.Remove(it->second.status_gauge);
    check_duration_.Remove(it->second.duration);
    it = checks_.erase(it);
  }

  if (node_info_series_ != nullptr &&
      (node_ != report.node_name || instance_type_ != report.instance_type)) {
    node_info_.Remove(node_info_series_);
    node_info_series_ = nullptr;
  }
  if (node_info_series_ == nullptr) {
    node_ = report.node_name;
    instance_type_ = report.instance_type;
    node_info_series_ = &node_info_.Add({{"node", node_}, {"instance_type", instance_type_}});
    node_info_series_->Set(1);
  }
  last_run_.Set(UnixSeconds(finished));
}

void ProbeMetrics::CountPublication(bool published) {
  (published ? published_ : failed_).Increment();
}

void ProbeMetrics::RecordPeerTest(std::string_view tier, std::string_view pass, bool passed,
                                  double seconds) {
  // Add returns the series already made for the same labels.
  peer_tests_
      .Add({{"tier", std::string(tier)},
            {"pass", std::string(pass)},
            {"result", passed ? "passed" : "failed"}})
      .Increment();
  peer_test_duration_.Add({{"tier", std::string(tier)}}, PeerTestBuckets()).Observe(seconds);
}

void ProbeMetrics::SetPeerStanding(std::string_view standing) {
  const std::lock_guard lock(mutex_);
  SetStandingLocked(standing);
}

void ProbeMetrics::SetStandingLocked(std::string_view standing) {
  if (standing_series_ != nullptr && standing_ != standing) {
    peer_standing_.Remove(standing_series_);
    standing_series_ = nullptr;
  }
  if (standing_series_ == nullptr) {
    standing_ = standing;
    standing_series_ = &peer_standing_.Add({{"standing", standing_}});
    standing_series_->Set(1);
  }
}

void ProbeMetrics::RecordPeerRound(double seconds, std::chrono::system_clock::time_point finished,
                                   std::string_view standing) {
  const std::lock_guard lock(mutex_);
  SetStandingLocked(standing);
  peer_round_duration_.Set(seconds);
  peer_last_round_.Set(UnixSeconds(finished));
}

void ProbeMetrics::RecordRasRound(double seconds, const std::map<std::string, int>& answers,
                                  const std::map<std::string, int>& health) {
  const std::lock_guard lock(mutex_);
  ras_round_duration_.Set(seconds);
  for (const auto& [answer, count] : answers) {
    ras_reads_.Add({{"answer", answer}}).Increment(count);
  }
  for (auto& [name, series] : ras_pod_series_) {
    const auto count = health.find(name);
    series->Set(count == health.end() ? 0 : count->second);
  }
}

}  // namespace ncclguard::probes
