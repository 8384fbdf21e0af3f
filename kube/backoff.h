// Jittered exponential backoff for reconnects and retries.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>

namespace ncclguard::kube {

struct BackoffOptions {
  std::chrono::milliseconds initial{800};
  std::chrono::milliseconds max{30000};
  double factor = 2.0;
  double jitter = 0.5;  // each delay is base * (1 + jitter * uniform[0,1))
};

class Backoff {
 public:
  explicit Backoff(BackoffOptions options = {}, std::uint64_t seed = std::random_device{}());

  // The delay before the next attempt; grows by `factor` up to `max` (jitter on top, capped
  // at max too).
  std::chrono::milliseconds Next();
  void Reset();
  int attempts() const { return attempts_; }

 private:
  BackoffOptions options_;
  std::mt19937_64 random_;
  double base_ms_;
  int attempts_ = 0;
};

}  // namespace ncclguard::kube
