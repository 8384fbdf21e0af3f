#include "webhook/metrics.h"

#include "core/rule.h"
#include "metrics/registry.h"

namespace ncclguard::webhook {
namespace {

prometheus::Family<prometheus::Counter>& CounterFamily(prometheus::Registry& registry,
                                                       const std::string& name,
                                                       const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

// The series of `key` in `cache`, made in `family` with these labels the first time.
template <typename T, typename Cache, typename Key>
T& Cached(Cache& cache, const Key& key, prometheus::Family<T>& family,
          const prometheus::Labels& labels) {
  auto it = cache.find(key);
  if (it == cache.end())
    it = cache.emplace(typename Cache::key_type(key), &family.Add(labels)).first;
  return *it->second;
}

}  // namespace

Metrics::Metrics() : Metrics(metrics::Global()) {}

Metrics::Metrics(prometheus::Registry& registry)
    : registry_(registry),
      requests_(CounterFamily(registry, "ncclguard_webhook_requests_total",
                              "HTTP requests to the webhook by endpoint and result.")),
      findings_(CounterFamily(registry, "ncclguard_webhook_findings_total",
                              "Rule findings in admission answers by rule id and level.")),
      audit_findings_(CounterFamily(
          registry, "ncclguard_webhook_audit_findings_total",
          "Findings audit mode admitted unchanged, by rule id and the action enforce mode would "
          "have taken (fix, deny, warn).")),
      internal_errors_(
          CounterFamily(registry, "ncclguard_webhook_internal_errors_total",
                        "Admission requests denied because a rule failed (fail closed).")),
      latency_(prometheus::BuildHistogram()
                   .Name("ncclguard_webhook_request_duration_seconds")
                   .Help("Time from a complete request body to the answer, by endpoint.")
                   .Register(registry)),
      certificate_reloads_(
          CounterFamily(registry, "ncclguard_webhook_certificate_reloads_total",
                        "Serving certificate reloads after the files changed, by result.")),
      certificate_expiry_(prometheus::BuildGauge()
                              .Name("ncclguard_webhook_certificate_expiry_timestamp_seconds")
                              .Help("notAfter of the serving certificate in use, as a Unix time.")
                              .Register(registry)
                              .Add({})),
      in_flight_memory_(
          prometheus::BuildGauge()
              .Name("ncclguard_webhook_in_flight_memory_budget_bytes")
              .Help("Memory the admission reviews in flight may hold together: the configured "
                    "budget, less when the process nears its container's memory limit.")
              .Register(registry)
              .Add({})),
      policy_reloads_(CounterFamily(registry, "ncclguard_webhook_policy_reloads_total",
                                    "Policy file reloads after the file changed, by result.")),
      gate_decisions_(CounterFamily(
          registry, "ncclguard_webhook_gate_decisions_total",
          "Managed jobs created, by what the gate made of them: held (suspended until the "
          "controller releases them) or admitted (their validated nodes already existed).")),
      gate_held_(gate_decisions_.Add({{"decision", "held"}})),
      gate_admitted_(gate_decisions_.Add({{"decision", "admitted"}})) {
  // The series an alert or a rate() reads start at 0 rather than missing until the first event.
  for (const char* endpoint : {"mutate", "validate"}) InternalErrorSeries(endpoint);
  // Denials by rule (and audit mode's would-be denials), every rule from 0: a rule's first denial
  // is then an increase that rate() sees (a series born at 1 shows none). One series a rule;
  // fixes and warnings appear as made.
  for (const core::Rule* rule : core::RuleRegistry::All()) {
    FindingSeries(rule->Info().id, core::LevelName(core::Level::Deny));
    AuditFindingSeries(rule->Info().id, core::LevelName(core::Level::Deny));
  }
  for (const char* result : {"success", "failure"}) {
    certificate_reloads_.Add({{"result", result}});
    policy_reloads_.Add({{"result", result}});
  }
}

prometheus::Counter& Metrics::RequestSeries(std::string_view endpoint, std::string_view result) {
  return Cached(request_series_, std::pair{endpoint, result}, requests_,
                {{"endpoint", std::string(endpoint)}, {"result", std::string(result)}});
}

prometheus::Histogram& Metrics::LatencySeries(std::string_view endpoint) {
  auto it = latency_series_.find(endpoint);
  if (it == latency_series_.end()) {
    const prometheus::Histogram::BucketBoundaries bounds(kLatencyBuckets.begin(),
                                                         kLatencyBuckets.end());
    it = latency_series_
             .emplace(std::string(endpoint),
                      &latency_.Add({{"endpoint", std::string(endpoint)}}, bounds))
             .first;
  }
  return *it->second;
}

prometheus::Counter& Metrics::FindingSeries(std::string_view rule, std::string_view level) {
  return Cached(finding_series_, std::pair{rule, level}, findings_,
                {{"rule", std::string(rule)}, {"level", std::string(level)}});
}

prometheus::Counter& Metrics::AuditFindingSeries(std::string_view rule, std::string_view action) {
  return Cached(audit_finding_series_, std::pair{rule, action}, audit_findings_,
                {{"rule", std::string(rule)}, {"action", std::string(action)}});
}

prometheus::Counter& Metrics::InternalErrorSeries(std::string_view endpoint) {
  return Cached(internal_error_series_, endpoint, internal_errors_,
                {{"endpoint", std::string(endpoint)}});
}

void Metrics::CountRequest(std::string_view endpoint, std::string_view result, double seconds) {
  std::lock_guard lock(mutex_);
  RequestSeries(endpoint, result).Increment();
  LatencySeries(endpoint).Observe(seconds);
}

void Metrics::CountAdmission(std::string_view endpoint, std::string_view result, double seconds,
                             std::span<const core::Finding> findings, bool audit) {
  std::lock_guard lock(mutex_);
  RequestSeries(endpoint, result).Increment();
  LatencySeries(endpoint).Observe(seconds);
  if (result == "error") InternalErrorSeries(endpoint).Increment();
  for (const auto& finding : findings) {
    const std::string_view level = core::LevelName(finding.level);
    (audit ? AuditFindingSeries(finding.rule, level) : FindingSeries(finding.rule, level))
        .Increment();
  }
}

void Metrics::CountFinding(std::string_view rule, std::string_view level) {
  std::lock_guard lock(mutex_);
  FindingSeries(rule, level).Increment();
}

void Metrics::CountInternalError(std::string_view endpoint) {
  std::lock_guard lock(mutex_);
  InternalErrorSeries(endpoint).Increment();
}

void Metrics::CountCertificateReload(bool ok) {
  certificate_reloads_.Add({{"result", ok ? "success" : "failure"}}).Increment();
}

void Metrics::SetCertificateExpiry(std::int64_t unix_seconds) {
  certificate_expiry_.Set(static_cast<double>(unix_seconds));
}

void Metrics::SetInFlightMemory(std::size_t bytes) {
  in_flight_memory_.Set(static_cast<double>(bytes));
}

void Metrics::CountPolicyReload(bool ok) {
  policy_reloads_.Add({{"result", ok ? "success" : "failure"}}).Increment();
}

void Metrics::CountGateDecision(bool admitted) {
  (admitted ? gate_admitted_ : gate_held_).Increment();
}

std::string Metrics::Render() const { return metrics::Render(registry_); }

}  // namespace ncclguard::webhook
