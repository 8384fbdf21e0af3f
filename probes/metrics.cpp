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
      failed_(ProbeRunsFamily(registry).Add({{"result", "failed"}})) {}

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

}  // namespace ncclguard::probes
