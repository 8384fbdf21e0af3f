// The seam between the manager and one controller (docs/operator.md "Wiring"). A controller
// names the kinds it watches (informers shared through Caches: one per kind, whoever watches
// it), for each a predicate (which changes matter) and a mapper (the keys a changed object
// affects), and a pure reconcile from a key to actions. The manager runs it while leading: its
// own work queue and workers, started once its own informers have synced (a kind whose CRD is
// not installed does not hold it up), the executor applying the actions, retries with backoff.
#pragma once

#include <atomic>
#include <concepts>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "controllers/actions.h"
#include "core/json.h"
#include "kube/informer.h"
#include "kube/stop_token.h"
#include "kube/work_queue.h"
#include "manager/executor.h"
#include "manager/metrics.h"

namespace ncclguard::manager {

// Something the manager runs until its stop token fires: a controller, the webhook certificate
// manager. Runnables that need leadership run only while this replica holds the Lease (and
// stop when it is lost); the others run on every replica from the start of Manager::Run.
struct Runnable {
  std::string name;
  bool needs_leader_election = true;
  std::function<void(const kube::StopToken& stop)> run;  // returns soon after `stop` fires
};

// One change of a watched object: old_object null for an add, new_object null for a delete.
struct Change {
  const core::Json* old_object = nullptr;
  const core::Json* new_object = nullptr;
  const core::Json& object() const { return new_object != nullptr ? *new_object : *old_object; }
};

// Which changes matter (null: every change).
using Predicate = std::function<bool(const Change& change)>;

// What a controller counts of one reconcile (metrics of what it did: the gate's releases,
// diagnoses). Called right after the reconcile, so it compares the result with the caches as
// the reconcile read them; the function it returns (may be null) runs once the actions were
// sent, with how many of them (in order) were applied: all, or those before a Conflict or an
// error (a release that landed before its condition met a Conflict is still a release). Must not
// throw.
using Applied = std::function<void(std::size_t applied)>;
template <typename Key>
using Observer = std::function<Applied(const Key& key, const controllers::ReconcileResult& result)>;

// A work-queue key with a text form that parses back (controllers::JobKey, say).
template <typename K>
concept QueueKey = requires(const K& key, std::string_view text) {
  { key.ToString() } -> std::convertible_to<std::string>;
  { K::Parse(text) } -> std::same_as<std::optional<K>>;
};

template <QueueKey Key>
struct Watch {
  kube::Informer* informer = nullptr;  // Caches' informer of the kind
  // The keys a changed object affects (for a delete, the object as last seen).
  std::function<std::vector<Key>(const core::Json& object)> map;
  Predicate predicate;
  // Its keys go ahead of the others in the work queue (kube::WorkQueue::AddUrgent): a change
  // that can release a held job, not one a thousand pods make.
  bool urgent = false;
  // Its keys are queued this long after the change (kube::WorkQueue::AddAfter: a key waiting
  // keeps its earlier time), so a burst of changes is one reconcile: the 64 pods of a job each
  // created, scheduled and started are a few reconciles of the job, not 200 of them each reading
  // 64 pods. Zero: at once.
  std::chrono::milliseconds coalesce{0};
};

template <QueueKey Key>
struct ControllerSpec {
  std::string name;  // in logs and stats: "trainingjob", "ncclpolicy"
  std::vector<Watch<Key>> watches;
  // Every key to reconcile when the controller starts (a new leader reads everything once).
  std::function<std::vector<Key>()> all_keys;
  // Pure: reads the caches (a ClusterView), returns the actions (controllers/).
  std::function<controllers::ReconcileResult(const Key& key)> reconcile;
  Observer<Key> observe;  // optional
  int workers = 1;
};

struct ControllerStats {
  std::atomic<long> reconciles{0};
  std::atomic<long> retries{0};
};

// The type-erased controller the manager runs (keys as text).
class Controller {
 public:
  struct TextWatch {
    kube::Informer* informer = nullptr;
    std::function<std::vector<std::string>(const core::Json& object)> map;
    Predicate predicate;
    bool urgent = false;
    std::chrono::milliseconds coalesce{0};
  };
  struct Spec {
    std::string name;
    std::vector<TextWatch> watches;
    std::function<std::vector<std::string>()> all_keys;
    // nullopt: the text is not a key of this controller (dropped).
    std::function<std::optional<controllers::ReconcileResult>(const std::string& key)> reconcile;
    Observer<std::string> observe;  // optional
    int workers = 1;
  };

  // Adds its handlers to the watched informers: before they start. Its reconciles and work
  // queue are counted in `metrics` under its name.
  Controller(Spec spec, Executor& executor, std::chrono::milliseconds sync_timeout,
             Metrics& metrics = Metrics::Process());
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  const std::string& name() const { return spec_.name; }
  // Waits for its informers (synced, or their resource not served; at most the sync timeout),
  // then reconciles until `leading` stops; in-flight reconciles end before this returns.
  void Run(const kube::StopToken& leading);
  // Its informers have synced or are not served.
  bool Synced() const;
  // Queues `key` for a reconcile while running (a change seen outside the watches, such as a
  // pod's log read); dropped otherwise, as Run reconciles every key when it starts.
  void Enqueue(const std::string& key);
  const ControllerStats& stats() const { return stats_; }

 private:
  void OnChange(const TextWatch& watch, const Change& change);
  void Process(kube::WorkQueue& queue, const std::string& key, const kube::StopToken& leading);
  // Counts a reconcile that ended with `outcome` after `seconds`.
  void CountReconcile(Outcome outcome, bool requeue_after, double seconds);
  std::vector<controllers::Action> TakeUnsent(const std::string& key);
  void KeepUnsent(const std::string& key, std::vector<controllers::Action> events);

  Spec spec_;
  Executor& executor_;
  std::chrono::milliseconds sync_timeout_;
  std::mutex queue_mutex_;
  kube::WorkQueue* queue_ = nullptr;  // while running
  // Events a reconcile could not write, sent before that key's next reconcile.
  std::mutex unsent_mutex_;
  std::map<std::string, std::vector<controllers::Action>> unsent_;
  ControllerStats stats_;
  Metrics::Reconciles reconciles_;
  kube::WorkQueueMetrics queue_metrics_;
};

// The typed spec as the manager runs it.
template <QueueKey Key>
Controller::Spec Erase(ControllerSpec<Key> spec) {
  const auto texts = [](const std::vector<Key>& keys) {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const Key& key : keys) out.push_back(key.ToString());
    return out;
  };
  Controller::Spec erased;
  erased.name = std::move(spec.name);
  erased.workers = spec.workers;
  for (Watch<Key>& watch : spec.watches) {
    erased.watches.push_back({watch.informer,
                              [map = std::move(watch.map), texts](const core::Json& object) {
                                return texts(map(object));
                              },
                              std::move(watch.predicate), watch.urgent, watch.coalesce});
  }
  erased.all_keys = [all = std::move(spec.all_keys), texts] { return texts(all()); };
  erased.reconcile = [reconcile = std::move(spec.reconcile)](
                         const std::string& text) -> std::optional<controllers::ReconcileResult> {
    const std::optional<Key> key = Key::Parse(text);
    if (!key) return std::nullopt;
    return reconcile(*key);
  };
  if (spec.observe) {
    erased.observe = [observe = std::move(spec.observe)](
                         const std::string& text,
                         const controllers::ReconcileResult& result) -> Applied {
      const std::optional<Key> key = Key::Parse(text);
      return key ? observe(*key, result) : nullptr;
    };
  }
  return erased;
}

}  // namespace ncclguard::manager
