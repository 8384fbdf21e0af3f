#include "manager/manager.h"

#include <unistd.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "controllers/actions.h"
#include "core/contract.h"
#include "kube/event_recorder.h"
#include "kube/leader_election.h"
#include "log/log.h"
#include "manager/cache.h"
#include "manager/controller_module.h"
#include "manager/executor.h"
#include "manager/metrics.h"
#include "manager/state_metrics.h"
#include "manager/wiring.h"
#include "metrics/registry.h"

namespace ncclguard::manager {
namespace {

std::string DefaultIdentity() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return std::string(host[0] != '\0' ? host : "ncclguard") + "_" + std::to_string(getpid());
}

// Runs each runnable on its own thread until `stop`; joins them all.
void RunAll(const std::vector<Runnable*>& runnables, const kube::StopToken& stop) {
  std::vector<std::thread> threads;
  for (Runnable* runnable : runnables) {
    threads.emplace_back([runnable, &stop] { runnable->run(stop); });
  }
  for (std::thread& thread : threads) thread.join();
}

}  // namespace

class Manager::Impl final : public ModuleContext {
 public:
  Impl(kube::ClientConfig config, ManagerOptions options, std::atomic<bool>& leading)
      : config_(std::move(config)),
        options_(std::move(options)),
        leading_flag_(leading),
        client_(std::make_shared<kube::Client>(config_, options_.client)),
        caches_(client_, ReadsOf(&options_)),
        recorder_(std::make_shared<kube::EventRecorder>(
            client_, std::string(core::kReportingController),
            options_.identity.empty() ? DefaultIdentity() : options_.identity)),
        executor_(client_, recorder_),
        policy_(options_.base_policy, options_.policy_changed) {
    if (options_.identity.empty()) options_.identity = DefaultIdentity();
    policy_.Watch(caches_.policies());  // before the controllers' handlers
    AddStateMetrics([this](std::vector<prometheus::MetricFamily>& out) {
      out.push_back(NodesFamily(EachIn(caches_.nodes()), FindIn(caches_.node_validations()),
                                *policy_.Current()));
    });
    state_.AddText([this](std::string& out) {
      WriteNodeCheckStatus(EachIn(caches_.node_validations()), out);
    });
    for (const ControllerModule* module : ControllerModules()) {
      if (ModuleEnabled(*module, options_)) module->install(*this);
    }
    state_registration_ =
        std::make_unique<metrics::CollectorRegistration>(metrics_.registry(), state_);
    if (options_.runtimes_ready) options_.runtimes_ready(WebhookSource::Runtimes(webhook_source_));
    if (options_.gate_ready) options_.gate_ready(WebhookSource::Gate(webhook_source_));
    if (options_.image_pins_ready) {
      options_.image_pins_ready(WebhookSource::ImagePins(webhook_source_));
    }
    if (options_.placement_ready) {
      options_.placement_ready(WebhookSource::Placement(webhook_source_));
    }
  }

  ~Impl() {
    // Before the caches go: a scrape in progress ends first, later ones do not read them.
    state_registration_.reset();
    // Before the caches go: a lookup the webhook still holds finds nothing from here on.
    if (options_.runtimes_ready) options_.runtimes_ready({});
    if (options_.gate_ready) options_.gate_ready({});
    if (options_.image_pins_ready) options_.image_pins_ready({});
    if (options_.placement_ready) options_.placement_ready({});
    webhook_source_->Detach();
  }

  // ModuleContext
  const Caches& caches() const override { return caches_; }
  std::shared_ptr<kube::Client> client() const override { return client_; }
  const PolicySource& policy() const override { return policy_; }
  const ManagerOptions& options() const override { return options_; }
  using ModuleContext::AddController;
  Controller& AddController(Controller::Spec spec) override {
    controllers_.push_back(std::make_unique<Controller>(std::move(spec), executor_,
                                                        options_.cache_sync_timeout, metrics_));
    Controller* controller = controllers_.back().get();
    Add({controller->name(), true,
         [controller](const kube::StopToken& leading) { controller->Run(leading); }});
    return *controller;
  }

  void Add(Runnable runnable) override { runnables_.push_back(std::move(runnable)); }
  Metrics& metrics() const override { return metrics_; }
  void AddStateMetrics(StateFamilies build) override { state_.Add(std::move(build)); }

  bool Ready() const {
    if (!started_.load()) return false;
    if (std::chrono::steady_clock::now() >= sync_deadline_.load()) return true;
    return std::all_of(controllers_.begin(), controllers_.end(),
                       [](const auto& controller) { return controller->Synced(); });
  }

  RunResult Run(const kube::StopToken& stop) {
    sync_deadline_ = std::chrono::steady_clock::now() + options_.cache_sync_timeout;
    started_ = true;
    caches_.Start();
    // The runnables that run on every replica end with Run (a lost lease ends them too).
    const kube::StopToken everywhere;
    const int forward = stop.OnStop([everywhere] { everywhere.Stop(); });
    std::vector<Runnable*> unelected, elected;
    for (Runnable& runnable : runnables_) {
      (runnable.needs_leader_election ? elected : unelected).push_back(&runnable);
    }
    std::thread others([&unelected, &everywhere] { RunAll(unelected, everywhere); });
    RunResult result = RunResult::kStopped;
    if (options_.leader_elect) {
      kube::LeaderElectionOptions election;
      election.lease_namespace = options_.lease_namespace;
      election.lease_name = options_.lease_name;
      election.identity = options_.identity;
      election.lease_duration = options_.lease_duration;
      election.renew_deadline = options_.renew_deadline;
      election.retry_period = options_.retry_period;
      election.release_on_stop = options_.release_lease_on_stop;
      election.owner = options_.owner;
      election.on_started_leading = [this, &elected](const kube::StopToken& leading) {
        Lead(elected, leading);
      };
      kube::LeaderElector elector(config_, std::move(election));
      elector.Run(stop);
      if (!stop.stopped()) result = RunResult::kLostLease;
    } else {
      // Alone, this replica leads: it says so as the Lease's holder would (alerts on no leader).
      prometheus::Gauge& master_status = metrics_.kube().LeaderStatus(options_.lease_name);
      master_status.Set(1);
      Lead(elected, stop);
      master_status.Set(0);
    }
    everywhere.Stop();
    others.join();
    stop.RemoveOnStop(forward);
    caches_.Stop();
    return result;
  }

  ManagerStats stats() const {
    ManagerStats s;
    for (const auto& controller : controllers_) {
      s.reconciles += controller->stats().reconciles.load();
      s.retries += controller->stats().retries.load();
    }
    const ExecutorStats& e = executor_.stats();
    s.creates = e.creates.load();
    s.already_existed = e.already_existed.load();
    s.patches = e.patches.load();
    s.events = e.events.load();
    s.conflicts = e.conflicts.load();
    s.cached_objects = caches_.CachedObjects();
    return s;
  }

 private:
  // Runs the runnables that need leadership until `leading` stops: then no worker starts
  // another action and in-flight reconciles end before this returns (and the lease is
  // released).
  void Lead(const std::vector<Runnable*>& elected, const kube::StopToken& leading) {
    leading_flag_ = true;
    log::Info("reconciling", {{"identity", options_.identity}});
    RunAll(elected, leading);
    leading_flag_ = false;
    log::Info("stopped reconciling", {{"identity", options_.identity}});
  }

  kube::ClientConfig config_;
  ManagerOptions options_;
  std::atomic<bool>& leading_flag_;
  std::shared_ptr<kube::Client> client_;
  Caches caches_;
  std::shared_ptr<kube::EventRecorder> recorder_;
  Executor executor_;
  PolicySource policy_;
  std::shared_ptr<WebhookSource> webhook_source_ = std::make_shared<WebhookSource>(caches_);
  std::vector<std::unique_ptr<Controller>> controllers_;
  std::vector<Runnable> runnables_;
  std::atomic<bool> started_{false};
  std::atomic<std::chrono::steady_clock::time_point> sync_deadline_{};
  Metrics& metrics_ = Metrics::Process();
  // Reported while this replica leads; registered once every module added its families.
  StateCollector state_{[this] { return leading_flag_.load(); }};
  std::unique_ptr<metrics::CollectorRegistration> state_registration_;
};

Manager::Manager(kube::ClientConfig config, ManagerOptions options)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(options), leading_)) {}

Manager::~Manager() = default;

void Manager::Add(Runnable runnable) { impl_->Add(std::move(runnable)); }

const Caches& Manager::caches() const { return impl_->caches(); }

RunResult Manager::Run(const kube::StopToken& stop) { return impl_->Run(stop); }

bool Manager::Ready() const { return impl_->Ready(); }

ManagerStats Manager::stats() const { return impl_->stats(); }

}  // namespace ncclguard::manager
