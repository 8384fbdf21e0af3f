// The training-job controller as a running process: informer caches, event handlers that map
// changes to job keys (docs/operator.md "Wiring"), a work queue drained by N workers that run
// ReconcileTrainingJob and apply its actions, the NcclPolicy, and leader election.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "core/policy.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/stop_token.h"

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
  // How long to wait for the caches before reconciling anyway (a CRD that is not installed
  // never syncs; its kind is simply not managed until it is).
  std::chrono::milliseconds cache_sync_timeout{30000};
  kube::ClientOptions client{500, 1000};
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

class Manager {
 public:
  Manager(kube::ClientConfig config, ManagerOptions options);
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // Watches, campaigns for the lease (unless leader election is off) and reconciles while
  // leading. Returns when `stop` fires or the lease is lost.
  RunResult Run(const kube::StopToken& stop);

  bool IsLeader() const { return leading_.load(); }
  // True once the caches have synced (or timed out waiting) and workers may start.
  bool Ready() const { return ready_.load(); }
  ManagerStats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> leading_{false};
  std::atomic<bool> ready_{false};
};

}  // namespace ncclguard::manager
