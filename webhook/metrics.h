// Prometheus text exposition (format 0.0.4) of the webhook's counters. No Debian package offers
// a C++ Prometheus client; the format is small enough for one file. Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace ncclguard::webhook {

class Metrics {
 public:
  // Upper bounds of the latency histogram, in seconds.
  static constexpr std::array<double, 12> kLatencyBuckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0};

  // One HTTP request on an endpoint ("mutate", "validate", "healthz"...) and how it ended
  // ("patched", "denied", "bad_request"...), with its handling time.
  void CountRequest(std::string_view endpoint, std::string_view result, double seconds);
  void CountFinding(std::string_view rule, std::string_view level);
  void CountInternalError(std::string_view endpoint);
  void CountCertificateReload(bool ok);
  void SetCertificateExpiry(std::int64_t unix_seconds);
  void CountPolicyReload(bool ok);

  std::string Render() const;

 private:
  struct Histogram {
    std::array<std::uint64_t, kLatencyBuckets.size()> buckets{};
    std::uint64_t count = 0;
    double sum = 0;
  };

  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, std::uint64_t> requests_;
  std::map<std::pair<std::string, std::string>, std::uint64_t> findings_;
  std::map<std::string, std::uint64_t> internal_errors_;
  std::map<std::string, Histogram> latency_;
  std::map<std::string, std::uint64_t> certificate_reloads_;
  std::map<std::string, std::uint64_t> policy_reloads_;
  std::int64_t certificate_expiry_ = 0;
};

}  // namespace ncclguard::webhook
