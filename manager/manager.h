// The controller process: shared informer caches (one per resource), the controllers (each its
// own watches, work queue and workers; manager/controller.h), other runnables such as the webhook
// certificate manager, and leader election (docs/operator.md "Wiring"). The controllers are the
// registered declarations (manager/controller_module.h) that the options enable; Add before Run
// for other runnables.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "controllers/pod_logs.h"
#include "core/gate.h"
#include "core/placement_request.h"
#include "core/policy.h"
#include "core/trainjob.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/owner_reference.h"
#include "kube/stop_token.h"
#include "manager/controller.h"

namespace ncclguard::manager {

struct ManagerOptions {
  int workers = 4;
  // The policy while no NcclPolicy "default" exists (--policy, else the built-in defaults).
  core::Policy base_policy = core::Policy::Defaults();
  bool leader_elect = true;
  std::string lease_namespace = "ncclguard-system";
  std::string lease_name = "ncclguard-controller";
  std::string identity;  // empty: <hostname>_<pid>
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
  // A stop hands the lease over at once; false leaves it to expire, as a killed process does.
  bool release_lease_on_stop = true;
  // The Lease's owner (the controller's ServiceAccount): deleted with it on uninstall.
  std::optional<kube::OwnerReference> owner;
  // How long a controller waits for its caches before reconciling anyway. A kind whose CRD is
  // not installed does not count (it is reported not served at once, and managed once served);
  // this bounds the wait for one that cannot be listed at all (RBAC, say).
  std::chrono::milliseconds cache_sync_timeout{30000};
  kube::ClientOptions client;
  // The optional controllers turned on, by their flags (ControllerModule::flag):
  // "kueue-admission-check", say. Always-on controllers run regardless.
  std::set<std::string> enable;
  // Reads bounded tails of managed training pods' logs for the log diagnoses (NcclTransport,
  // efa-tcp-fallback, ...; manager/pod_log_reader.h). Needs get on pods/log.
  bool read_pod_logs = true;
  controllers::LogReadLimits pod_log_limits;
  // Told the policy in force whenever it changes (an NcclPolicy update, the nodes' learned
  // catalog in its status), on the informer's thread: the in-process webhook follows it.
  std::function<void(std::shared_ptr<const core::Policy>)> policy_changed;
  // Given where Kubeflow Trainer's runtimes are read (the caches) once they exist, and an empty
  // lookup before they go: the in-process webhook judges a TrainJob with its runtime.
  std::function<void(core::RuntimeLookup)> runtimes_ready;
  // Given the gate's fast path (core/gate.h) over the caches once they exist, and an empty lookup
  // before they go: the in-process webhook admits a job unsuspended when its nodes are validated.
  std::function<void(core::GateLookup)> gate_ready;
  // Given the jobs' recorded image digests over the caches once they exist (core/image_pin.h),
  // and an empty lookup before they go: the in-process webhook pins a job's later pods.
  std::function<void(core::ImagePinLookup)> image_pins_ready;
  // Given where managed jobs' pods are asked to go (core/placement_request.h) over the caches once
  // they exist, and an empty lookup before they go: the in-process webhook asks Kueue or the
  // scheduler to keep a job's pods in one network block.
  std::function<void(core::PlacementLookup)> placement_ready;
};

struct ManagerStats {
  long reconciles = 0;
  long retries = 0;
  long creates = 0;
  long already_existed = 0;
  long patches = 0;
  long events = 0;
  long conflicts = 0;
  std::size_t cached_objects = 0;
};

enum class RunResult {
  kStopped,   // `stop` fired: reconciling ended, the lease was released
  kLostLease  // another replica leads now; the process should exit and be restarted
};

class Caches;
class PolicySource;

class Manager {
 public:
  Manager(kube::ClientConfig config, ManagerOptions options);
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // Before Run: something else to run beside the controllers (the webhook certificate
  // manager, say). Controllers come from their registered declarations
  // (manager/controller_module.h), the enabled ones installed by the constructor.
  void Add(Runnable runnable);
  // The shared caches (their sizes, for stats and tests).
  const Caches& caches() const;

  // Watches, starts the runnables that need no leadership, campaigns for the lease (unless
  // leader election is off) and runs the controllers while leading. Returns when `stop` fires
  // or the lease is lost; every runnable has ended by then.
  RunResult Run(const kube::StopToken& stop);

  bool IsLeader() const { return leading_.load(); }
  // True once every controller's caches have synced or are not served (or the sync timeout
  // passed since Run started).
  bool Ready() const;
  ManagerStats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> leading_{false};
};

}  // namespace ncclguard::manager
