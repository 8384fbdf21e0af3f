#include "kube/backoff.h"

#include <algorithm>

namespace ncclguard::kube {

Backoff::Backoff(BackoffOptions options, std::uint64_t seed)
    : options_(options), random_(seed), base_ms_(static_cast<double>(options.initial.count())) {}

std::chrono::milliseconds Backoff::Next() {
  double max_ms = static_cast<double>(options_.max.count());
  double base = std::min(base_ms_, max_ms);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  double delay = std::min(base * (1.0 + options_.jitter * unit(random_)), max_ms);
  base_ms_ = std::min(base_ms_ * options_.factor, max_ms);
  ++attempts_;
  return std::chrono::milliseconds(static_cast<long>(delay));
}

void Backoff::Reset() {
  base_ms_ = static_cast<double>(options_.initial.count());
  attempts_ = 0;
}

}  // namespace ncclguard::kube
