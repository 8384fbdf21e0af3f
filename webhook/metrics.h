// The webhook's metrics (requests, findings, audit findings, latency, certificate and policy
// reloads), as
// prometheus-cpp families in a registry: the process's (metrics::Global()) unless a test gives
// its own. Thread-safe.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "core/finding.h"
#include "metrics/registry.h"

namespace ncclguard::webhook {

class Metrics {
 public:
  // Upper bounds of the latency histogram, in seconds.
  static constexpr std::array<double, 12> kLatencyBuckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0};

  Metrics();  // in metrics::Global()
  explicit Metrics(prometheus::Registry& registry);

  // One HTTP request on an endpoint ("mutate", "validate", "healthz"...) and how it ended
  // ("patched", "denied", "bad_request"...), with its handling time.
  void CountRequest(std::string_view endpoint, std::string_view result, double seconds);
  void CountFinding(std::string_view rule, std::string_view level);
  // One answered AdmissionReview: the request, its findings and, for result "error", an
  // internal error. `audit`: the findings are what audit mode would have acted on, counted as
  // audit findings by rule and action (their level) instead.
  void CountAdmission(std::string_view endpoint, std::string_view result, double seconds,
                      std::span<const core::Finding> findings, bool audit = false);
  void CountInternalError(std::string_view endpoint);
  void CountCertificateReload(bool ok);
  void SetCertificateExpiry(std::int64_t unix_seconds);
  // The memory budget of the reviews in flight now: ServerConfig::max_in_flight_bytes, less
  // when the rest of the process leaves less under ServerConfig::memory_limit_bytes.
  void SetInFlightMemory(std::size_t bytes);
  void CountPolicyReload(bool ok);
  // A managed job's CREATE: held by the gate, or admitted at once (its nodes validated).
  void CountGateDecision(bool admitted);

  // The text exposition of the registry these metrics are in (all of it).
  std::string Render() const;

 private:
  // The series of a label pair, found without allocating once made: prometheus-cpp's Add
  // builds a std::map of labels and hashes it on every call, too slow for each admission.
  template <typename T>
  using SeriesCache = std::map<std::pair<std::string, std::string>, T*, metrics::ViewPairLess<>>;

  prometheus::Counter& RequestSeries(std::string_view endpoint, std::string_view result);
  prometheus::Histogram& LatencySeries(std::string_view endpoint);
  prometheus::Counter& FindingSeries(std::string_view rule, std::string_view level);
  prometheus::Counter& AuditFindingSeries(std::string_view rule, std::string_view action);
  prometheus::Counter& InternalErrorSeries(std::string_view endpoint);

  prometheus::Registry& registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Counter>& findings_;
  prometheus::Family<prometheus::Counter>& audit_findings_;
  prometheus::Family<prometheus::Counter>& internal_errors_;
  prometheus::Family<prometheus::Histogram>& latency_;
  prometheus::Family<prometheus::Counter>& certificate_reloads_;
  prometheus::Gauge& certificate_expiry_;
  prometheus::Gauge& in_flight_memory_;
  prometheus::Family<prometheus::Counter>& policy_reloads_;
  prometheus::Family<prometheus::Counter>& gate_decisions_;
  prometheus::Counter& gate_held_;
  prometheus::Counter& gate_admitted_;

  std::mutex mutex_;  // the caches below
  SeriesCache<prometheus::Counter> request_series_;
  SeriesCache<prometheus::Counter> finding_series_;
  SeriesCache<prometheus::Counter> audit_finding_series_;
  std::map<std::string, prometheus::Histogram*, std::less<>> latency_series_;
  std::map<std::string, prometheus::Counter*, std::less<>> internal_error_series_;
};

}  // namespace ncclguard::webhook
