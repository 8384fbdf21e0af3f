#include "kube/rate_limiter.h"

#include <algorithm>
#include <utility>

namespace ncclguard::kube {

TokenBucket::TokenBucket(double qps, int burst, Now now)
    : qps_(qps), burst_(std::max(1, burst)), now_(std::move(now)), tokens_(burst_), last_(now_()) {}

TokenBucket::Clock::duration TokenBucket::Reserve() {
  if (qps_ <= 0) return Clock::duration::zero();
  std::lock_guard lock(mutex_);
  Clock::time_point now = now_();
  double elapsed = std::chrono::duration<double>(now - last_).count();
  if (elapsed > 0) {
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    last_ = now;
  }
  // Tokens may go negative: that debt is the queue of callers already waiting.
  tokens_ -= 1.0;
  if (tokens_ >= 0) return Clock::duration::zero();
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(-tokens_ / qps_));
}

bool TokenBucket::Wait(const StopToken& stop) {
  Clock::duration wait = Reserve();
  if (wait <= Clock::duration::zero()) return !stop.stopped();
  return !stop.WaitFor(wait);
}

}  // namespace ncclguard::kube
