#include "kube/leader_election.h"

#include <cstdio>
#include <ctime>
#include <random>
#include <stdexcept>
#include <thread>
#include <utility>

#include "log/log.h"

namespace ncclguard::kube {
namespace {

using Steady = std::chrono::steady_clock;

std::chrono::milliseconds Jittered(std::chrono::milliseconds period) {
  static thread_local std::mt19937 random{std::random_device{}()};
  std::uniform_real_distribution<double> unit(0.0, 0.2);
  return std::chrono::milliseconds(
      static_cast<long>(static_cast<double>(period.count()) * (1.0 + unit(random))));
}

}  // namespace

std::string FormatMicroTime(std::chrono::system_clock::time_point time) {
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(time.time_since_epoch());
  std::time_t seconds = static_cast<std::time_t>(micros.count() / 1000000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buffer[40];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S", &utc);
  char result[64];
  std::snprintf(result, sizeof result, "%s.%06ldZ", buffer,
                static_cast<long>(micros.count() % 1000000));
  return result;
}

core::Json NewLeaseObject(const ResourceRef& lease, const core::Json& spec,
                          const std::optional<OwnerReference>& owner) {
  core::Json object = {{"apiVersion", "coordination.k8s.io/v1"},
                       {"kind", "Lease"},
                       {"metadata", {{"name", lease.name}, {"namespace", lease.namespace_}}},
                       {"spec", spec}};
  AddOwnerReference(object, owner);
  return object;
}

LeaderElector::LeaderElector(const ClientConfig& config, LeaderElectionOptions options)
    : options_(std::move(options)),
      master_status_((options_.metrics != nullptr ? *options_.metrics : Metrics::Process())
                         .LeaderStatus(options_.lease_name)) {
  ClientOptions client_options;
  client_options.request_timeout = std::max(options_.retry_period, std::chrono::milliseconds(1000));
  client_options.max_retries_on_429 = 0;
  client_options.metrics = options_.metrics;
  client_ = std::make_shared<Client>(config, client_options);
  lease_ = resources::Leases().In(options_.lease_namespace).Named(options_.lease_name);
  if (options_.identity.empty()) throw std::invalid_argument("leader election needs an identity");
}

bool LeaderElector::IsLeader() const {
  std::lock_guard lock(mutex_);
  return leading_ && Steady::now() - last_renew_ < options_.renew_deadline;
}

std::string LeaderElector::ObservedLeader() const {
  std::lock_guard lock(mutex_);
  return observed_spec_.is_object() ? observed_spec_.value("holderIdentity", "") : "";
}

void LeaderElector::Observe(const core::Json& spec) {
  std::string before;
  std::string after = spec.value("holderIdentity", "");
  {
    std::lock_guard lock(mutex_);
    if (observed_spec_ == spec) return;
    before = observed_spec_.is_object() ? observed_spec_.value("holderIdentity", "") : "";
    observed_spec_ = spec;
    observed_time_ = Steady::now();
  }
  if (before != after && !after.empty() && options_.on_new_leader) options_.on_new_leader(after);
}

bool LeaderElector::TryAcquireOrRenew() {
  std::string now = FormatMicroTime(std::chrono::system_clock::now());
  long duration_seconds = std::max<long>(
      1, static_cast<long>(
             std::chrono::duration_cast<std::chrono::seconds>(options_.lease_duration).count()));
  core::Json lease;
  try {
    lease = client_->Get(lease_);
  } catch (const ApiError& error) {
    if (error.code() != ErrorCode::kNotFound) throw;
    core::Json spec = {{"holderIdentity", options_.identity},
                       {"leaseDurationSeconds", duration_seconds},
                       {"acquireTime", now},
                       {"renewTime", now},
                       {"leaseTransitions", 0}};
    core::Json created =
        client_->Create(lease_.Named(""), NewLeaseObject(lease_, spec, options_.owner));
    Observe(created["spec"]);
    return true;
  }
  core::Json spec =
      lease.contains("spec") && lease["spec"].is_object() ? lease["spec"] : core::Json::object();
  Observe(spec);
  std::string holder = spec.value("holderIdentity", "");
  bool mine = holder == options_.identity;
  if (!holder.empty() && !mine) {
    long held_seconds = spec.value("leaseDurationSeconds", duration_seconds);
    std::lock_guard lock(mutex_);
    if (Steady::now() < observed_time_ + std::chrono::seconds(held_seconds)) return false;
  }
  core::Json updated_spec = spec;
  updated_spec["holderIdentity"] = options_.identity;
  updated_spec["leaseDurationSeconds"] = duration_seconds;
  updated_spec["renewTime"] = now;
  if (!mine) {
    updated_spec["acquireTime"] = now;
    updated_spec["leaseTransitions"] = spec.value("leaseTransitions", 0) + 1;
  }
  lease["spec"] = updated_spec;
  AddOwnerReference(lease, options_.owner);  // a Lease created before it had one
  // The update carries the resourceVersion we read: if another replica wrote in between,
  // the server answers Conflict and this round is lost.
  core::Json stored = client_->Update(lease_, lease);
  Observe(stored["spec"]);
  return true;
}

void LeaderElector::Release() {
  try {
    core::Json lease = client_->Get(lease_);
    if (!lease.contains("spec") || lease["spec"].value("holderIdentity", "") != options_.identity) {
      return;
    }
    lease["spec"]["holderIdentity"] = "";
    lease["spec"]["leaseDurationSeconds"] = 1;
    lease["spec"]["renewTime"] = FormatMicroTime(std::chrono::system_clock::now());
    client_->Update(lease_, lease);
    log::Info("leader election: released the lease",
              {{"lease", lease_.Describe()}, {"identity", options_.identity}});
  } catch (const std::exception& error) {
    log::Warn(
        "leader election: releasing the lease failed",
        {{"lease", lease_.Describe()}, {"identity", options_.identity}, {"error", error.what()}});
  }
}

void LeaderElector::Run(const StopToken& stop) {
  const std::string lease = lease_.Describe();
  while (!stop.stopped()) {
    bool acquired = false;
    try {
      acquired = TryAcquireOrRenew();
    } catch (const ApiError& error) {
      if (error.code() != ErrorCode::kConflict && error.code() != ErrorCode::kAlreadyExists) {
        log::Warn("leader election: acquiring failed",
                  {{"lease", lease}, {"identity", options_.identity}, {"error", error.what()}});
      }
    }
    if (acquired) break;
    if (stop.WaitFor(Jittered(options_.retry_period))) return;
  }
  if (stop.stopped()) return;

  log::Info("leader election: became leader", {{"lease", lease}, {"identity", options_.identity}});
  StopToken leading;
  {
    std::lock_guard lock(mutex_);
    leading_ = true;
    last_renew_ = Steady::now();
  }
  master_status_.Set(1);
  int forward = stop.OnStop([leading] { leading.Stop(); });
  std::thread worker([&] {
    if (options_.on_started_leading) options_.on_started_leading(leading);
  });

  while (!stop.WaitFor(options_.retry_period)) {
    bool renewed = false;
    try {
      renewed = TryAcquireOrRenew();
    } catch (const ApiError& error) {
      log::Warn("leader election: renewing failed",
                {{"lease", lease}, {"identity", options_.identity}, {"error", error.what()}});
    }
    std::string holder = ObservedLeader();
    std::lock_guard lock(mutex_);
    if (renewed) {
      last_renew_ = Steady::now();
    } else if (!holder.empty() && holder != options_.identity) {
      log::Error("leader election: another replica holds the lease; stopped leading",
                 {{"lease", lease}, {"identity", options_.identity}, {"holder", holder}});
      break;
    } else if (Steady::now() - last_renew_ >= options_.renew_deadline) {
      log::Error("leader election: lease not renewed within the deadline; stopped leading",
                 {{"lease", lease},
                  {"identity", options_.identity},
                  {"renewDeadlineMs", options_.renew_deadline.count()}});
      break;
    }
  }
  {
    std::lock_guard lock(mutex_);
    leading_ = false;
  }
  master_status_.Set(0);
  leading.Stop();
  stop.RemoveOnStop(forward);
  worker.join();
  if (stop.stopped() && options_.release_on_stop) Release();
  if (options_.on_stopped_leading) options_.on_stopped_leading();
}

}  // namespace ncclguard::kube
