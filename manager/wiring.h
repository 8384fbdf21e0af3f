// The controllers `ncclguard controller` runs, as specs for the manager (manager/controller.h):
// what each watches, which changes matter and the keys they map to (docs/operator.md "Wiring").
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "controllers/job_kind.h"
#include "controllers/policy_object.h"
#include "controllers/policy_reconciler.h"
#include "core/policy.h"
#include "manager/cache.h"
#include "manager/controller.h"
#include "manager/metrics.h"
#include "manager/pod_log_reader.h"

namespace ncclguard::manager {

// The policy in force, on every replica: follows the NcclPolicy "default" in the cache (the last
// good one when an update is unusable), else `base` (--policy or the built-in defaults).
class PolicySource {
 public:
  // `changed`, when set, is told each new policy (from the informer's thread).
  explicit PolicySource(core::Policy base,
                        std::function<void(std::shared_ptr<const core::Policy>)> changed = {});
  // Adds its handlers to the NcclPolicy informer (before it starts, and before the controllers'
  // handlers: a job requeued for a new policy is reconciled with it).
  void Watch(kube::Informer& policies);
  std::shared_ptr<const core::Policy> Current() const;

 private:
  void Observe(const kube::CachedObject& object);  // null: deleted

  core::Policy base_;
  std::function<void(std::shared_ptr<const core::Policy>)> changed_;
  mutable std::mutex mutex_;
  controllers::PolicyHolder holder_;
  std::shared_ptr<const core::Policy> current_;
};

// PyTorchJob, MPIJob, JobSet and opted-in batch Jobs: ReconcileTrainingJob over a CacheView.
// `pod_logs`: what PodLogReader read of the jobs' pods (null: logs are not read). `metrics`: where
// releases, diagnoses and transports are counted (null: nowhere).
ControllerSpec<controllers::JobKey> TrainingJobController(const Caches& caches,
                                                          const PolicySource& policy, int workers,
                                                          const PodLogStore* pod_logs = nullptr,
                                                          Metrics* metrics = nullptr);

// Whether the training-job controller manages `key` (its namespace is opted in; a batch Job is
// labelled): the pods whose logs PodLogReader reads.
bool ManagedJob(const Caches& caches, const controllers::JobKey& key);

// The NcclPolicy "default": its Accepted condition (ReconcileNcclPolicy).
ControllerSpec<controllers::PolicyKey> NcclPolicyController(const Caches& caches);

}  // namespace ncclguard::manager
