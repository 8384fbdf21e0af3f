#include "manager/controller.h"

#include <algorithm>
#include <thread>

#include "log/log.h"

namespace ncclguard::manager {
namespace {

// With the queue's backoff (5 ms doubling) 16 attempts span about five minutes: long enough to
// outlast an API server restart, short enough to give up on a namespace being deleted.
constexpr int kMaxEventAttempts = 16;

}  // namespace

Controller::Controller(Spec spec, Executor& executor, std::chrono::milliseconds sync_timeout,
                       Metrics& metrics)
    : spec_(std::move(spec)),
      executor_(executor),
      sync_timeout_(sync_timeout),
      reconciles_(metrics.Controller(spec_.name)),
      queue_metrics_(metrics.kube().Queue(spec_.name)) {
  for (const TextWatch& watch : spec_.watches) {
    const TextWatch* w = &watch;  // spec_ is not resized after this
    w->informer->AddHandlers(
        {[this, w](const kube::CachedObject& now) {
           OnChange(*w, {nullptr, now.get()});
         },
         [this, w](const kube::CachedObject& old, const kube::CachedObject& now) {
           OnChange(*w, {old.get(), now.get()});
         },
         [this, w](const kube::CachedObject& old) {
           OnChange(*w, {old.get(), nullptr});
         }});
  }
}

// Runs on the informers' threads, on every replica: nothing is mapped while not leading (Run
// enqueues every key when it starts).
void Controller::OnChange(const TextWatch& watch, const Change& change) {
  {
    std::lock_guard lock(queue_mutex_);
    if (queue_ == nullptr) return;
  }
  if (watch.predicate && !watch.predicate(change)) return;
  const std::vector<std::string> keys = watch.map(change.object());
  std::lock_guard lock(queue_mutex_);
  if (queue_ == nullptr) return;
  for (const std::string& key : keys) {
    if (watch.urgent) {
      queue_->AddUrgent(key);
    } else if (watch.coalesce > std::chrono::milliseconds::zero()) {
      queue_->AddAfter(key, watch.coalesce);
    } else {
      queue_->Add(key);
    }
  }
}

void Controller::Enqueue(const std::string& key) {
  std::lock_guard lock(queue_mutex_);
  if (queue_ != nullptr) queue_->Add(key);
}

bool Controller::Synced() const {
  return std::all_of(spec_.watches.begin(), spec_.watches.end(), [](const TextWatch& watch) {
    return watch.informer->HasSynced() || watch.informer->NotServed();
  });
}

void Controller::Run(const kube::StopToken& leading) {
  // In slices, so a stop is not held up by an informer that cannot list (no RBAC, say).
  const auto deadline = std::chrono::steady_clock::now() + sync_timeout_;
  while (!Synced() && !leading.stopped() && std::chrono::steady_clock::now() < deadline) {
    for (const TextWatch& watch : spec_.watches) {
      if (!watch.informer->WaitForSyncOrNotServed(std::chrono::milliseconds(100))) break;
    }
  }
  if (leading.stopped()) return;
  for (const TextWatch& watch : spec_.watches) {
    if (watch.informer->HasSynced()) continue;
    // A kind whose CRD is not installed is usual (no JobSet in a Kubeflow cluster).
    const bool not_served = watch.informer->NotServed();
    log::Write(not_served ? log::Level::Info : log::Level::Warn,
               not_served ? "not served (CRD not installed?); its objects are reconciled once it is"
                          : "cache not synced; reconciling without it until it is",
               {{"controller", spec_.name}, {"resource", watch.informer->resource().Describe()}});
  }
  kube::WorkQueueOptions queue_options;
  queue_options.metrics = queue_metrics_;
  kube::WorkQueue queue(queue_options);
  {
    std::lock_guard lock(queue_mutex_);
    queue_ = &queue;
  }
  const int wake = leading.OnStop([&queue] { queue.ShutDown(); });
  for (const std::string& key : spec_.all_keys()) queue.Add(key);
  std::vector<std::thread> workers;
  for (int i = 0; i < std::max(1, spec_.workers); ++i) {
    workers.emplace_back([this, &queue, &leading] {
      while (auto key = queue.Get()) {
        Process(queue, *key, leading);
        queue.Done(*key);
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  leading.RemoveOnStop(wake);
  std::lock_guard lock(queue_mutex_);
  queue_ = nullptr;
}

void Controller::Process(kube::WorkQueue& queue, const std::string& key,
                         const kube::StopToken& leading) {
  if (leading.stopped()) return;
  const log::Scope log_scope({{"controller", spec_.name}, {"key", key}});
  const auto began = std::chrono::steady_clock::now();
  const auto seconds = [&began] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  };
  std::string error;
  std::vector<controllers::Action> unsent = TakeUnsent(key);
  // Events refused again and again (a namespace being deleted) are given up on.
  if (!unsent.empty() && queue.NumRequeues(key) < kMaxEventAttempts) {
    std::vector<controllers::Action> still_unsent;
    const Outcome resent = executor_.Apply(unsent, leading, &error, &still_unsent);
    if (resent != Outcome::kDone) {
      KeepUnsent(key, std::move(still_unsent));
      if (resent == Outcome::kStopped) return;
      CountReconcile(Outcome::kRetry, false, seconds());
      ++stats_.retries;
      queue.AddRateLimited(key);
      return;
    }
  }
  Outcome outcome = Outcome::kRetry;
  std::optional<controllers::ReconcileResult> result;
  Applied applied;
  std::size_t applied_count = 0;
  try {
    result = spec_.reconcile(key);
    if (!result) return;  // not a key of this controller
    ++stats_.reconciles;
    if (spec_.observe) applied = spec_.observe(key, *result);
    std::vector<controllers::Action> failed_events;
    outcome = executor_.Apply(result->actions, leading, &error, &failed_events, &applied_count);
    KeepUnsent(key, std::move(failed_events));
  } catch (const std::exception& e) {  // a response the client could not read, say
    error = e.what();
  }
  const bool requeue_after = result && result->requeue_after;
  CountReconcile(outcome, requeue_after, seconds());
  if (applied && applied_count > 0) applied(applied_count);
  switch (outcome) {
    case Outcome::kDone:
      queue.Forget(key);
      if (requeue_after) queue.AddAfter(key, *result->requeue_after);
      break;
    case Outcome::kDropped:
      queue.Forget(key);
      break;
    case Outcome::kRetry:
    case Outcome::kConflict:
      ++stats_.retries;
      log::Info("reconcile failed; retrying with backoff", {{"error", error}});
      queue.AddRateLimited(key);
      break;
    case Outcome::kStopped:
      break;
  }
}

void Controller::CountReconcile(Outcome outcome, bool requeue_after, double seconds) {
  prometheus::Counter* result = nullptr;
  switch (outcome) {
    case Outcome::kDone:
      result = requeue_after ? reconciles_.requeue_after : reconciles_.success;
      break;
    case Outcome::kDropped:  // the object is gone: nothing left to do
      result = reconciles_.success;
      break;
    case Outcome::kConflict:
      result = reconciles_.requeue;
      break;
    case Outcome::kRetry:
      result = reconciles_.error;
      reconciles_.errors->Increment();
      break;
    case Outcome::kStopped:  // cut short by the end of leadership: no result
      return;
  }
  result->Increment();
  reconciles_.time->Observe(seconds);
}

std::vector<controllers::Action> Controller::TakeUnsent(const std::string& key) {
  std::lock_guard lock(unsent_mutex_);
  const auto it = unsent_.find(key);
  if (it == unsent_.end()) return {};
  std::vector<controllers::Action> events = std::move(it->second);
  unsent_.erase(it);
  return events;
}

void Controller::KeepUnsent(const std::string& key, std::vector<controllers::Action> events) {
  if (events.empty()) return;
  std::lock_guard lock(unsent_mutex_);
  auto& slot = unsent_[key];
  for (auto& e : events) slot.push_back(std::move(e));
}

}  // namespace ncclguard::manager
