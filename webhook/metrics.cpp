#include "webhook/metrics.h"

#include <cstdio>

namespace ncclguard::webhook {
namespace {

// Label values are ours (endpoint, result, rule ids) but escape anyway: the format demands it.
std::string Escape(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.9g", value);
  return buffer;
}

void Header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

}  // namespace

namespace {

// Finds `key` without allocating; inserts (allocating) only the first time.
template <typename Map>
typename Map::mapped_type& Slot(Map& map, std::string_view first, std::string_view second) {
  const std::pair<std::string_view, std::string_view> key{first, second};
  auto it = map.lower_bound(key);
  if (it == map.end() || it->first.first != first || it->first.second != second) {
    it = map.emplace_hint(it, std::pair{std::string(first), std::string(second)},
                          typename Map::mapped_type{});
  }
  return it->second;
}

}  // namespace

void Metrics::CountRequest(std::string_view endpoint, std::string_view result, double seconds) {
  std::lock_guard lock(mutex_);
  CountRequestLocked(endpoint, result, seconds);
}

void Metrics::CountAdmission(std::string_view endpoint, std::string_view result, double seconds,
                             std::span<const core::Finding> findings) {
  std::lock_guard lock(mutex_);
  CountRequestLocked(endpoint, result, seconds);
  if (result == "error") ++internal_errors_[std::string(endpoint)];
  for (const auto& finding : findings) {
    ++Slot(findings_, finding.rule, core::LevelName(finding.level));
  }
}

void Metrics::CountRequestLocked(std::string_view endpoint, std::string_view result,
                                 double seconds) {
  ++Slot(requests_, endpoint, result);
  auto histogram_it = latency_.find(endpoint);
  if (histogram_it == latency_.end()) {
    histogram_it = latency_.emplace(std::string(endpoint), Histogram{}).first;
  }
  Histogram& histogram = histogram_it->second;
  for (size_t i = 0; i < kLatencyBuckets.size(); ++i) {
    if (seconds <= kLatencyBuckets[i]) ++histogram.buckets[i];
  }
  ++histogram.count;
  histogram.sum += seconds;
}

void Metrics::CountFinding(std::string_view rule, std::string_view level) {
  std::lock_guard lock(mutex_);
  ++Slot(findings_, rule, level);
}

void Metrics::CountInternalError(std::string_view endpoint) {
  std::lock_guard lock(mutex_);
  ++internal_errors_[std::string(endpoint)];
}

void Metrics::CountCertificateReload(bool ok) {
  std::lock_guard lock(mutex_);
  ++certificate_reloads_[ok ? "success" : "failure"];
}

void Metrics::SetCertificateExpiry(std::int64_t unix_seconds) {
  std::lock_guard lock(mutex_);
  certificate_expiry_ = unix_seconds;
}

void Metrics::CountPolicyReload(bool ok) {
  std::lock_guard lock(mutex_);
  ++policy_reloads_[ok ? "success" : "failure"];
}

std::string Metrics::Render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  Header(out, "ncclguard_webhook_requests_total", "counter",
         "HTTP requests to the webhook by endpoint and result.");
  for (const auto& [key, value] : requests_) {
    out += "ncclguard_webhook_requests_total{endpoint=\"" + Escape(key.first) + "\",result=\"" +
           Escape(key.second) + "\"} " + std::to_string(value) + "\n";
  }
  Header(out, "ncclguard_webhook_findings_total", "counter",
         "Rule findings in admission answers by rule id and level.");
  for (const auto& [key, value] : findings_) {
    out += "ncclguard_webhook_findings_total{rule=\"" + Escape(key.first) + "\",level=\"" +
           Escape(key.second) + "\"} " + std::to_string(value) + "\n";
  }
  Header(out, "ncclguard_webhook_internal_errors_total", "counter",
         "Admission requests denied because a rule failed (fail closed).");
  for (const auto& [endpoint, value] : internal_errors_) {
    out += "ncclguard_webhook_internal_errors_total{endpoint=\"" + Escape(endpoint) + "\"} " +
           std::to_string(value) + "\n";
  }
  Header(out, "ncclguard_webhook_request_duration_seconds", "histogram",
         "Time from a complete request body to the answer, by endpoint.");
  for (const auto& [endpoint, histogram] : latency_) {
    const std::string label = "endpoint=\"" + Escape(endpoint) + "\"";
    for (size_t i = 0; i < kLatencyBuckets.size(); ++i) {
      out += "ncclguard_webhook_request_duration_seconds_bucket{" + label + ",le=\"" +
             Number(kLatencyBuckets[i]) + "\"} " + std::to_string(histogram.buckets[i]) + "\n";
    }
    out += "ncclguard_webhook_request_duration_seconds_bucket{" + label + ",le=\"+Inf\"} " +
           std::to_string(histogram.count) + "\n";
    out += "ncclguard_webhook_request_duration_seconds_sum{" + label + "} " +
           Number(histogram.sum) + "\n";
    out += "ncclguard_webhook_request_duration_seconds_count{" + label + "} " +
           std::to_string(histogram.count) + "\n";
  }
  Header(out, "ncclguard_webhook_certificate_reloads_total", "counter",
         "Serving certificate reloads after the files changed, by result.");
  for (const auto& [result, value] : certificate_reloads_) {
    out += "ncclguard_webhook_certificate_reloads_total{result=\"" + result + "\"} " +
           std::to_string(value) + "\n";
  }
  Header(out, "ncclguard_webhook_certificate_expiry_timestamp_seconds", "gauge",
         "notAfter of the serving certificate in use, as a Unix time.");
  out += "ncclguard_webhook_certificate_expiry_timestamp_seconds " +
         std::to_string(certificate_expiry_) + "\n";
  Header(out, "ncclguard_webhook_policy_reloads_total", "counter",
         "Policy file reloads after the file changed, by result.");
  for (const auto& [result, value] : policy_reloads_) {
    out += "ncclguard_webhook_policy_reloads_total{result=\"" + result + "\"} " +
           std::to_string(value) + "\n";
  }
  return out;
}

}  // namespace ncclguard::webhook
