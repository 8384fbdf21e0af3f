// Prometheus text exposition (format 0.0.4) of the webhook's counters. No Debian package offers
// a C++ Prometheus client; the format is small enough for one file. Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "core/finding.h"

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
  // One answered AdmissionReview: the request, its findings and, for result "error", an
  // internal error, under one lock.
  void CountAdmission(std::string_view endpoint, std::string_view result, double seconds,
                      std::span<const core::Finding> findings);
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

  void CountRequestLocked(std::string_view endpoint, std::string_view result, double seconds);

  mutable std::mutex mutex_;
  // Transparent: the hot path looks keys up as string_views, without building strings.
  struct PairLess {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      using Views = std::pair<std::string_view, std::string_view>;
      return Views(a.first, a.second) < Views(b.first, b.second);
    }
  };
  std::map<std::pair<std::string, std::string>, std::uint64_t, PairLess> requests_;
  std::map<std::pair<std::string, std::string>, std::uint64_t, PairLess> findings_;
  std::map<std::string, std::uint64_t> internal_errors_;
  std::map<std::string, Histogram, std::less<>> latency_;
  std::map<std::string, std::uint64_t> certificate_reloads_;
  std::map<std::string, std::uint64_t> policy_reloads_;
  std::int64_t certificate_expiry_ = 0;
};

}  // namespace ncclguard::webhook
