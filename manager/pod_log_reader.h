// Reads bounded tails of training pods' logs for the log diagnoses (docs/operator.md "Pod
// logs"): which pods and when (controllers::LogReadPlanner: once per phase, slowly while
// Running, a global rate), the read itself (pods/log with tailLines and limitBytes <= 64 KiB), and
// what is kept (controllers::PodLogDigest: verdicts and matched lines, never the log).
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "controllers/job_kind.h"
#include "controllers/pod_logs.h"
#include "core/json.h"
#include "kube/client.h"
#include "manager/metrics.h"

namespace ncclguard::manager {

// The digests of the pods read, by "namespace/pod"; shared by the reader and the reconcilers.
class PodLogStore {
 public:
  std::vector<controllers::PodLogDigest> Get(std::string_view namespace_,
                                             std::string_view pod) const;
  // Merged into what an earlier read of the same container found.
  void Put(const std::string& pod_key, controllers::PodLogDigest digest);
  // Drops every pod `live` says is gone.
  void Retain(const std::function<bool(const std::string& pod_key)>& live);
  std::size_t Size() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::vector<controllers::PodLogDigest>, std::less<>> digests_;
};

// Returns a container's log tail, or nullopt when it cannot be read (not started, gone, denied).
using PodLogSource = std::function<std::optional<std::string>(
    const std::string& namespace_, const std::string& pod, const std::string& container)>;

// GET /api/v1/namespaces/N/pods/P/log?container=C&tailLines=..&limitBytes=.. with `client`.
PodLogSource KubePodLogSource(std::shared_ptr<kube::Client> client);

class PodLogReader {
 public:
  // Reads are counted in `metrics` (null: nowhere).
  PodLogReader(controllers::LogReadLimits limits, PodLogSource source, PodLogStore& store,
               Metrics* metrics = nullptr)
      : planner_(limits), source_(std::move(source)), store_(store), metrics_(metrics) {}

  // Calls its argument with the pods of the pod cache until it returns false
  // (kube::Informer::ForEachWhile: one decoded at a time, never the whole cache).
  using Pods = std::function<void(const std::function<bool(const core::Json& pod)>& visit)>;
  // Whether the pod "namespace/name" is still in the pod cache.
  using Live = std::function<bool(const std::string& pod_key)>;

  // One pass over `pods` at `now`: reads the logs of those due, for pods of jobs `managed`
  // accepts, until the global rate runs out: then the pass ends (the pods after it wait for the
  // next), so that at 100,000 pods a pass decodes the few it reads, not every pod every 2 s. The
  // pods `live` says are gone are forgotten. Returns the jobs whose pods were read.
  std::vector<controllers::JobKey> Tick(
      const Pods& pods, const Live& live,
      const std::function<bool(const controllers::JobKey&)>& managed, controllers::Timestamp now);

  long reads() const { return reads_; }

 private:
  void Count(LogRead result) {
    if (metrics_ != nullptr) metrics_->CountLogRead(result);
  }

  controllers::LogReadPlanner planner_;
  PodLogSource source_;
  PodLogStore& store_;
  Metrics* metrics_;
  long reads_ = 0;
};

}  // namespace ncclguard::manager
