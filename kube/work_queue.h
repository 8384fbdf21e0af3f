// A work queue of object keys for controllers: a key is queued at most once however often it
// is added, a key being processed is never handed to a second worker (it is queued again when
// Done if it was added meanwhile), per-key exponential backoff for retries under an overall limit
// on the retries of all keys together, delayed adds, and urgent adds served before the rest (a
// held job its nodes can now release goes ahead of a thousand pods' status changes).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "kube/metrics.h"
#include "kube/rate_limiter.h"

namespace ncclguard::kube {

struct WorkQueueOptions {
  std::chrono::milliseconds base_delay{5};  // first retry; doubles per failure
  std::chrono::milliseconds max_delay{1000 * 1000};
  // The retries of all keys together: a token bucket of `retry_burst` refilled at `retry_qps`
  // per second (client-go's default controller rate limiter has the same two limits). A retry
  // waits for the later of its key's backoff and its turn in the bucket, so a hundred keys
  // failing at once (an API server answering 500) are not retried in a storm. <= 0: no limit.
  double retry_qps = 10;
  int retry_burst = 100;
  // Where depth, adds, retries and the waits are recorded (Metrics::Queue); none by default.
  WorkQueueMetrics metrics{};
};

class WorkQueue {
 public:
  using Clock = std::chrono::steady_clock;

  explicit WorkQueue(WorkQueueOptions options = {},
                     std::function<Clock::time_point()> now = Clock::now);

  void Add(const std::string& key);
  // Served before every key added otherwise, first come first served among the urgent ones; a
  // key queued already moves up, one being processed is queued urgent when Done.
  void AddUrgent(const std::string& key);
  void AddAfter(const std::string& key, Clock::duration delay);
  // Adds after the key's backoff, base_delay * 2^(failures so far) capped at max_delay, or
  // after its turn in the overall retry bucket when that is later.
  void AddRateLimited(const std::string& key);
  // The key succeeded: its failure count starts over.
  void Forget(const std::string& key);
  int NumRequeues(const std::string& key) const;
  // The delay AddRateLimited would use next (does not count as a failure).
  Clock::duration NextBackoff(const std::string& key) const;

  // Blocks until a key is ready; nullopt once shut down. Call Done(key) after processing.
  std::optional<std::string> Get();
  // Get without blocking: nullopt when nothing is ready now.
  std::optional<std::string> TryGet();
  void Done(const std::string& key);

  // Wakes every Get; queued keys are dropped, Done still works.
  void ShutDown();
  bool shutting_down() const;
  std::size_t Len() const;  // keys ready to be handed out

 private:
  void AddLocked(const std::string& key, bool urgent = false);
  // Puts a dirty key that no worker holds in line (its urgent or its normal one).
  void EnqueueLocked(const std::string& key);
  void PromoteDueLocked(Clock::time_point now);
  std::optional<std::string> PopLocked();
  Clock::duration BackoffLocked(const std::string& key) const;
  // The time for the duration histograms (not read when they are not recorded).
  Clock::time_point StampLocked() const;
  void SetDepthLocked();

  WorkQueueOptions options_;
  std::function<Clock::time_point()> now_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  // The lines of keys to hand out, urgent_ first. An entry is stale when its key is no longer
  // dirty, or is held by a worker, or moved to urgent_: PopLocked skips those. Every dirty key
  // that no worker holds has an entry that is not stale.
  std::deque<std::string> queue_;
  std::deque<std::string> urgent_;
  std::unordered_set<std::string> urgent_keys_;  // dirty keys added urgent
  // Queued or to be re-queued when Done, with when it was added; handed out and not Done yet,
  // with when it was handed out (the times only while the durations are recorded).
  std::unordered_map<std::string, Clock::time_point> dirty_;
  std::unordered_map<std::string, Clock::time_point> processing_;
  std::multimap<Clock::time_point, std::string> waiting_;
  std::unordered_map<std::string, Clock::time_point> waiting_until_;  // earliest per key
  std::unordered_map<std::string, int> failures_;
  TokenBucket retries_;
  bool shutting_down_ = false;
};

}  // namespace ncclguard::kube
