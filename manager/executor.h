// Applies a reconcile's actions through the API client, in order, stopping at the first that
// fails (docs/operator.md "Wiring"): the work queue then retries with backoff and the next
// reconcile reads the state again.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "controllers/actions.h"
#include "kube/client.h"
#include "kube/event_recorder.h"
#include "kube/stop_token.h"

namespace ncclguard::manager {

enum class Outcome {
  kDone,      // every action applied (an AlreadyExists create counts: the object is there)
  kRetry,     // an action failed (API server away, refused...): requeue with backoff
  kConflict,  // a write carried a resourceVersion the object no longer has: read it again
  kDropped,   // the job is gone (NotFound): forget the key
  kStopped,   // leadership ended before every action was applied
};

struct ExecutorStats {
  std::atomic<long> creates{0};
  std::atomic<long> already_existed{0};
  std::atomic<long> patches{0};
  std::atomic<long> events{0};
  std::atomic<long> conflicts{0};
  std::atomic<long> errors{0};
};

class Executor {
 public:
  Executor(std::shared_ptr<kube::Client> client, std::shared_ptr<kube::EventRecorder> recorder)
      : client_(std::move(client)), recorder_(std::move(recorder)) {}

  // `leading` stops the execution between two actions (a lost lease writes nothing more).
  // `error` receives what failed, for the log. An Event that cannot be written does not stop
  // the others: it goes to `unsent` (the caller sends it again before the next reconcile,
  // since the reconcile that follows a release no longer says "Admitted") and the outcome is
  // kRetry.
  // `applied`: how many of the actions, in order, were applied before the one that ended them
  // (all of them when kDone; an Event that failed counts, as it does not end them).
  Outcome Apply(const std::vector<controllers::Action>& actions, const kube::StopToken& leading,
                std::string* error = nullptr, std::vector<controllers::Action>* unsent = nullptr,
                std::size_t* applied = nullptr);

  const ExecutorStats& stats() const { return stats_; }

 private:
  std::shared_ptr<kube::Client> client_;
  std::shared_ptr<kube::EventRecorder> recorder_;
  ExecutorStats stats_;
};

// The client's ResourceRef for an action's target.
kube::ResourceRef ResourceFor(const core::ObjectRef& target);

}  // namespace ncclguard::manager
