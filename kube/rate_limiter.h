// Client-side rate limiting: a token bucket of `burst` tokens refilled at `qps` per second.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>

#include "kube/stop_token.h"

namespace ncclguard::kube {

class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;
  using Now = std::function<Clock::time_point()>;

  // qps <= 0 disables limiting.
  TokenBucket(double qps, int burst, Now now = Clock::now);

  // Takes a token and returns how long the caller must wait before using it (zero when one
  // was available). Reservations queue: each waits for the token after the previous one.
  Clock::duration Reserve();

  // Reserve() and sleep; false when `stop` fired during the wait.
  bool Wait(const StopToken& stop);

 private:
  double qps_;
  double burst_;
  Now now_;
  std::mutex mutex_;
  double tokens_;
  Clock::time_point last_;
};

}  // namespace ncclguard::kube
