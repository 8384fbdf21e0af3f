// What a reconcile of a training job did that the metrics count (manager/metrics.h): the gate's
// release, diagnoses its NcclDiagnosis condition names for the first time, its NcclTransport set
// or changed. Found by comparing the reconcile's actions with the job as the caches held it, so
// a reconcile that repeats them (a stale cache) counts nothing twice: its status patch carries
// the old resourceVersion and fails before the release (docs/operator.md "Metrics").
#pragma once

#include <cstddef>
#include <deque>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "controllers/actions.h"
#include "controllers/job_kind.h"
#include "controllers/timestamps.h"
#include "core/json.h"
#include "manager/metrics.h"

namespace ncclguard::manager {

struct JobChanges {
  bool released = false;
  // From the job's creation (else the start of its hold) to the release; unknown: nullopt.
  std::optional<double> held_seconds;
  std::vector<std::string> new_diagnoses;  // diagnosis ids
  std::optional<std::string> transport;    // EFA, Socket, Unknown
};

// Whether the result patches the job at all (else it changes nothing counted, and the job need
// not be read).
bool PatchesJob(const controllers::JobKey& key, const controllers::ReconcileResult& result);

// `job`: the job as the reconcile read it (nullopt: not cached). `applied`: how many of the
// result's actions (in order) were applied; what the others would have changed is not counted.
JobChanges ChangesOf(const controllers::JobKey& key, const std::optional<core::Json>& job,
                     const controllers::ReconcileResult& result, controllers::Timestamp now,
                     std::size_t applied = std::numeric_limits<std::size_t>::max());

void Count(const JobChanges& changes, core::WorkloadKind kind, Metrics& metrics);

// The cached versions of jobs whose changes were counted. A reconcile that reads a version again
// (the informer has not seen its own release yet, and another event woke the job) repeats the
// same writes; they are counted once. Keeps the last kKeep versions.
class CountedVersions {
 public:
  // True the first time `version` ("<namespace>/<name>@<resourceVersion>") is given.
  bool First(const std::string& version);

 private:
  static constexpr std::size_t kKeep = 4096;
  std::mutex mutex_;
  std::set<std::string> seen_;
  std::deque<std::string> order_;
};

}  // namespace ncclguard::manager
