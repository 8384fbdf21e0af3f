#include "kube/work_queue.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace ncclguard::kube {

WorkQueue::WorkQueue(WorkQueueOptions options, std::function<Clock::time_point()> now)
    : options_(options),
      now_(std::move(now)),
      retries_(options.retry_qps, options.retry_burst, [this] { return now_(); }) {}

WorkQueue::Clock::time_point WorkQueue::StampLocked() const {
  const WorkQueueMetrics& m = options_.metrics;
  return m.queue_duration != nullptr || m.work_duration != nullptr ? now_() : Clock::time_point{};
}

// Keys waiting for a worker: queued, or added again while a worker holds them.
void WorkQueue::SetDepthLocked() {
  if (options_.metrics.depth != nullptr) {
    options_.metrics.depth->Set(static_cast<double>(shutting_down_ ? 0 : dirty_.size()));
  }
}

void WorkQueue::EnqueueLocked(const std::string& key) {
  (urgent_keys_.contains(key) ? urgent_ : queue_).push_back(key);
  changed_.notify_one();
}

void WorkQueue::AddLocked(const std::string& key, bool urgent) {
  if (shutting_down_) return;
  if (dirty_.contains(key)) {
    // Waiting already: an urgent add moves it up (its normal entry turns stale).
    if (urgent && urgent_keys_.insert(key).second && !processing_.contains(key)) {
      EnqueueLocked(key);
    }
    return;
  }
  dirty_.emplace(key, StampLocked());
  if (urgent) urgent_keys_.insert(key);
  if (options_.metrics.adds != nullptr) options_.metrics.adds->Increment();
  SetDepthLocked();
  if (processing_.contains(key)) return;  // Done will queue it again
  EnqueueLocked(key);
}

void WorkQueue::Add(const std::string& key) {
  std::lock_guard lock(mutex_);
  AddLocked(key);
}

void WorkQueue::AddUrgent(const std::string& key) {
  std::lock_guard lock(mutex_);
  AddLocked(key, true);
}

void WorkQueue::AddAfter(const std::string& key, Clock::duration delay) {
  std::lock_guard lock(mutex_);
  if (shutting_down_) return;
  if (delay <= Clock::duration::zero()) {
    AddLocked(key);
    return;
  }
  Clock::time_point when = now_() + delay;
  // A key waiting already keeps the earlier of its two times.
  auto existing = waiting_until_.find(key);
  if (existing != waiting_until_.end()) {
    if (existing->second <= when) return;
    auto range = waiting_.equal_range(existing->second);
    for (auto it = range.first; it != range.second; ++it) {
      if (it->second == key) {
        waiting_.erase(it);
        break;
      }
    }
  }
  waiting_until_[key] = when;
  waiting_.emplace(when, key);
  changed_.notify_all();  // a Get may need to wake earlier
}

WorkQueue::Clock::duration WorkQueue::BackoffLocked(const std::string& key) const {
  auto found = failures_.find(key);
  int failures = found == failures_.end() ? 0 : found->second;
  double delay_ms =
      static_cast<double>(options_.base_delay.count()) * std::pow(2.0, std::min(failures, 62));
  double max_ms = static_cast<double>(options_.max_delay.count());
  return std::chrono::milliseconds(static_cast<long>(std::min(delay_ms, max_ms)));
}

void WorkQueue::AddRateLimited(const std::string& key) {
  Clock::duration delay;
  {
    std::lock_guard lock(mutex_);
    delay = BackoffLocked(key);
    ++failures_[key];
  }
  if (options_.metrics.retries != nullptr) options_.metrics.retries->Increment();
  delay = std::max(delay, retries_.Reserve());
  AddAfter(key, delay);
}

void WorkQueue::Forget(const std::string& key) {
  std::lock_guard lock(mutex_);
  failures_.erase(key);
}

int WorkQueue::NumRequeues(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto found = failures_.find(key);
  return found == failures_.end() ? 0 : found->second;
}

WorkQueue::Clock::duration WorkQueue::NextBackoff(const std::string& key) const {
  std::lock_guard lock(mutex_);
  return BackoffLocked(key);
}

void WorkQueue::PromoteDueLocked(Clock::time_point now) {
  while (!waiting_.empty() && waiting_.begin()->first <= now) {
    std::string key = waiting_.begin()->second;
    waiting_.erase(waiting_.begin());
    waiting_until_.erase(key);
    AddLocked(key);
  }
}

std::optional<std::string> WorkQueue::PopLocked() {
  std::string key;
  while (true) {
    const bool from_urgent = !urgent_.empty();
    std::deque<std::string>& line = from_urgent ? urgent_ : queue_;
    if (line.empty()) return std::nullopt;
    key = std::move(line.front());
    line.pop_front();
    if (!dirty_.contains(key) || processing_.contains(key)) continue;  // stale
    if (!from_urgent && urgent_keys_.contains(key)) continue;          // moved up: stale
    break;
  }
  urgent_keys_.erase(key);
  const Clock::time_point now = StampLocked();
  const auto added = dirty_.find(key);
  if (options_.metrics.queue_duration != nullptr) {
    options_.metrics.queue_duration->Observe(
        std::chrono::duration<double>(now - added->second).count());
  }
  dirty_.erase(added);
  processing_.insert_or_assign(key, now);
  SetDepthLocked();
  return key;
}

std::optional<std::string> WorkQueue::Get() {
  std::unique_lock lock(mutex_);
  while (true) {
    if (shutting_down_) return std::nullopt;
    PromoteDueLocked(now_());
    if (auto key = PopLocked()) return key;
    if (waiting_.empty()) {
      changed_.wait(lock);
    } else {
      auto wait = waiting_.begin()->first - now_();
      changed_.wait_for(lock, std::max(wait, Clock::duration(std::chrono::milliseconds(1))));
    }
  }
}

std::optional<std::string> WorkQueue::TryGet() {
  std::lock_guard lock(mutex_);
  if (shutting_down_) return std::nullopt;
  PromoteDueLocked(now_());
  return PopLocked();
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard lock(mutex_);
  const auto handed_out = processing_.find(key);
  if (handed_out == processing_.end()) return;
  if (options_.metrics.work_duration != nullptr) {
    options_.metrics.work_duration->Observe(
        std::chrono::duration<double>(StampLocked() - handed_out->second).count());
  }
  processing_.erase(handed_out);
  if (dirty_.contains(key) && !shutting_down_) EnqueueLocked(key);
}

void WorkQueue::ShutDown() {
  {
    std::lock_guard lock(mutex_);
    shutting_down_ = true;
    queue_.clear();
    urgent_.clear();
    urgent_keys_.clear();
    waiting_.clear();
    waiting_until_.clear();
    SetDepthLocked();
  }
  changed_.notify_all();
}

bool WorkQueue::shutting_down() const {
  std::lock_guard lock(mutex_);
  return shutting_down_;
}

std::size_t WorkQueue::Len() const {
  std::lock_guard lock(mutex_);
  if (shutting_down_) return 0;
  std::size_t ready = 0;
  for (const auto& [key, added] : dirty_) ready += processing_.contains(key) ? 0 : 1;
  return ready;
}

}  // namespace ncclguard::kube
