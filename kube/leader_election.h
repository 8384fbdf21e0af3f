// Leader election on a coordination.k8s.io/v1 Lease, with client-go's timings: a leader
// renews every retry_period and gives up leading the moment it has not renewed for
// renew_deadline; others take the lease once they have seen it unrenewed for lease_duration
// (measured on their own clock, so clock skew between replicas does not matter).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/json.h"
#include "kube/client.h"
#include "kube/metrics.h"
#include "kube/owner_reference.h"
#include "kube/stop_token.h"

namespace ncclguard::kube {

struct LeaderElectionOptions {
  std::string lease_namespace;
  std::string lease_name;
  std::string identity;  // unique per replica: pod name, or host + pid
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
  bool release_on_stop = true;  // a graceful stop hands the lease over at once
  // Set on the Lease when created, and added to one without it on the next write, so that the
  // garbage collector deletes the Lease with its owner. None: no owner reference.
  std::optional<OwnerReference> owner;
  // ncclguard_leader_election_master_status{name=lease_name} and the elector's requests go here;
  // null: Metrics::Process().
  Metrics* metrics = nullptr;

  // Runs on its own thread once leading; must return soon after `leading` stops.
  std::function<void(const StopToken& leading)> on_started_leading;
  // Runs after leading ended (lease lost or stop), once on_started_leading returned.
  std::function<void()> on_stopped_leading;
  // The holder changed (including to ourselves).
  std::function<void(const std::string& identity)> on_new_leader;
};

class LeaderElector {
 public:
  // Lease requests time out after retry_period so a hung API server cannot hold a lost
  // leader past its renew deadline; the elector has its own client for that.
  LeaderElector(const ClientConfig& config, LeaderElectionOptions options);

  // Campaigns until the lease is acquired, leads until it is lost or `stop` fires, and
  // returns. Returns at once if `stop` fires while campaigning.
  void Run(const StopToken& stop);

  bool IsLeader() const;
  std::string ObservedLeader() const;

 private:
  bool TryAcquireOrRenew();
  void Release();
  void Observe(const core::Json& spec);

  std::shared_ptr<Client> client_;
  LeaderElectionOptions options_;
  ResourceRef lease_;
  prometheus::Gauge& master_status_;  // 1 while leading

  mutable std::mutex mutex_;
  core::Json observed_spec_;
  std::chrono::steady_clock::time_point observed_time_{};
  std::chrono::steady_clock::time_point last_renew_{};
  bool leading_ = false;
};

// The Lease object created for `lease` (namespace and name set) with `spec`, owned by `owner`
// when given.
core::Json NewLeaseObject(const ResourceRef& lease, const core::Json& spec,
                          const std::optional<OwnerReference>& owner);

// Kubernetes MicroTime ("2026-01-02T03:04:05.123456Z") for a system clock time.
std::string FormatMicroTime(std::chrono::system_clock::time_point time);

}  // namespace ncclguard::kube
