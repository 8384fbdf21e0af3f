#include "manager/manager.h"

#include <algorithm>

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "controllers/labels.h"
#include "controllers/policy_object.h"
#include "controllers/training_job_reconciler.h"
#include "core/contract.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/leader_election.h"
#include "kube/work_queue.h"
#include "manager/cache.h"
#include "manager/executor.h"

namespace ncclguard::manager {
namespace {

using controllers::JobKey;
using core::Json;
using core::WorkloadKind;

std::string DefaultIdentity() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return std::string(host[0] != '\0' ? host : "ncclguard") + "_" + std::to_string(getpid());
}

// With the queue's backoff (5 ms doubling) 16 attempts span about five minutes: long enough to
// outlast an API server restart, short enough to give up on a namespace being deleted.
constexpr int kMaxEventAttempts = 16;

controllers::Timestamp Now() {
  return std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
}

std::string LogLine(std::initializer_list<std::pair<const char*, std::string>> fields) {
  Json line = Json::object();
  for (const auto& [key, value] : fields) line[key] = value;
  return line.dump();
}

}  // namespace

class Manager::Impl {
 public:
  Impl(kube::ClientConfig config, ManagerOptions options, std::atomic<bool>& leading,
       std::atomic<bool>& ready)
      : config_(std::move(config)),
        options_(std::move(options)),
        leading_flag_(leading),
        ready_flag_(ready),
        client_(std::make_shared<kube::Client>(config_, options_.client)),
        caches_(client_),
        recorder_(std::make_shared<kube::EventRecorder>(
            client_, std::string(core::kReportingController),
            options_.identity.empty() ? DefaultIdentity() : options_.identity)),
        executor_(client_, recorder_),
        policy_(std::make_shared<const core::Policy>(options_.base_policy)) {
    if (options_.identity.empty()) options_.identity = DefaultIdentity();
    AddHandlers();
  }

  RunResult Run(const kube::StopToken& stop) {
    caches_.Start();
    // In slices, so SIGTERM is not held up for the whole timeout by a kind whose CRD is not
    // installed (kubelet's grace period is 30 s, as long as the default timeout).
    const auto sync_deadline = std::chrono::steady_clock::now() + options_.cache_sync_timeout;
    std::vector<std::string> unsynced;
    do {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          sync_deadline - std::chrono::steady_clock::now());
      unsynced = caches_.WaitForSync(
          std::clamp(left, std::chrono::milliseconds(1), std::chrono::milliseconds(250)));
    } while (!unsynced.empty() && !stop.stopped() &&
             std::chrono::steady_clock::now() < sync_deadline);
    for (const std::string& name : stop.stopped() ? std::vector<std::string>{} : unsynced) {
      spdlog::warn("{}", LogLine({{"msg", "cache not synced; reconciling without it until it is"},
                                  {"resource", name}}));
    }
    ready_flag_ = true;
    RunResult result = RunResult::kStopped;
    if (!stop.stopped()) {
      if (options_.leader_elect) {
        kube::LeaderElectionOptions election;
        election.lease_namespace = options_.lease_namespace;
        election.lease_name = options_.lease_name;
        election.identity = options_.identity;
        election.lease_duration = options_.lease_duration;
        election.renew_deadline = options_.renew_deadline;
        election.retry_period = options_.retry_period;
        election.release_on_stop = options_.release_lease_on_stop;
        election.on_started_leading = [this](const kube::StopToken& leading) { Lead(leading); };
        kube::LeaderElector elector(config_, std::move(election));
        elector.Run(stop);
        if (!stop.stopped()) result = RunResult::kLostLease;
      } else {
        Lead(stop);
      }
    }
    caches_.Stop();
    return result;
  }

  ManagerStats stats() const {
    ManagerStats s;
    s.reconciles = reconciles_.load();
    s.retries = retries_.load();
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
  // Reconciles until `leading` stops: then no worker starts another action, the queue is shut
  // down and in-flight reconciles end before this returns (and the lease is released).
  void Lead(const kube::StopToken& leading) {
    kube::WorkQueue queue;
    {
      std::lock_guard lock(queue_mutex_);
      queue_ = &queue;
    }
    leading_flag_ = true;
    spdlog::info("{}", LogLine({{"msg", "reconciling"}, {"identity", options_.identity}}));
    const int wake = leading.OnStop([&queue] { queue.ShutDown(); });
    SyncPolicyStatus();
    EnqueueAllJobs();
    std::vector<std::thread> workers;
    for (int i = 0; i < std::max(1, options_.workers); ++i) {
      workers.emplace_back([this, &queue, &leading] { Work(queue, leading); });
    }
    for (std::thread& worker : workers) worker.join();
    leading.RemoveOnStop(wake);
    leading_flag_ = false;
    {
      std::lock_guard lock(queue_mutex_);
      queue_ = nullptr;
    }
    spdlog::info("{}", LogLine({{"msg", "stopped reconciling"}, {"identity", options_.identity}}));
  }

  void Work(kube::WorkQueue& queue, const kube::StopToken& leading) {
    while (auto key = queue.Get()) {
      Process(queue, *key, leading);
      queue.Done(*key);
    }
  }

  void Process(kube::WorkQueue& queue, const std::string& key_text,
               const kube::StopToken& leading) {
    const auto key = JobKey::Parse(key_text);
    if (!key || leading.stopped()) return;
    std::vector<controllers::Action> unsent = TakeUnsent(key_text);
    // Events refused again and again (a namespace being deleted) are given up on.
    if (!unsent.empty() && queue.NumRequeues(key_text) < kMaxEventAttempts) {
      std::vector<controllers::Action> still_unsent;
      std::string error;
      if (executor_.Apply(unsent, leading, &error, &still_unsent) != Outcome::kDone) {
        KeepUnsent(key_text, std::move(still_unsent));
        ++retries_;
        queue.AddRateLimited(key_text);
        return;
      }
    }
    ++reconciles_;
    const CacheView view(caches_, CurrentPolicy());
    const controllers::ReconcileResult result =
        controllers::ReconcileTrainingJob(*key, view, Now());
    std::string error;
    Outcome outcome = Outcome::kRetry;
    try {
      std::vector<controllers::Action> failed_events;
      outcome = executor_.Apply(result.actions, leading, &error, &failed_events);
      KeepUnsent(key_text, std::move(failed_events));
    } catch (const std::exception& e) {  // a response the client could not read, say
      error = e.what();
    }
    switch (outcome) {
      case Outcome::kDone:
        queue.Forget(key_text);
        if (result.requeue_after) queue.AddAfter(key_text, *result.requeue_after);
        break;
      case Outcome::kDropped:
        queue.Forget(key_text);
        break;
      case Outcome::kRetry:
        ++retries_;
        spdlog::info("{}", LogLine({{"msg", "reconcile failed; retrying with backoff"},
                                    {"job", key_text},
                                    {"error", error}}));
        queue.AddRateLimited(key_text);
        break;
      case Outcome::kStopped:
        break;
    }
  }

  std::vector<controllers::Action> TakeUnsent(const std::string& key) {
    std::lock_guard lock(unsent_mutex_);
    const auto it = unsent_.find(key);
    if (it == unsent_.end()) return {};
    std::vector<controllers::Action> events = std::move(it->second);
    unsent_.erase(it);
    return events;
  }

  void KeepUnsent(const std::string& key, std::vector<controllers::Action> events) {
    if (events.empty()) return;
    std::lock_guard lock(unsent_mutex_);
    auto& slot = unsent_[key];
    for (auto& e : events) slot.push_back(std::move(e));
  }

  // Enqueues into the running queue (none while not leading: Lead enqueues everything).
  void Enqueue(const JobKey& key) {
    std::lock_guard lock(queue_mutex_);
    if (queue_ != nullptr) queue_->Add(key.ToString());
  }

  template <typename Filter>
  void EnqueueJobs(Filter&& filter) {
    std::lock_guard lock(queue_mutex_);
    if (queue_ == nullptr) return;
    for (const core::KindInfo& info : core::ManagedKinds()) {
      for (const auto& job : caches_.Job(info.kind).List()) {
        if (!filter(*job)) continue;
        queue_->Add(
            JobKey{info.kind, controllers::Meta(*job, "namespace"), controllers::Meta(*job, "name")}
                .ToString());
      }
    }
  }

  void EnqueueAllJobs() {
    EnqueueJobs([](const Json&) { return true; });
  }

  void EnqueuePendingJobs() {
    EnqueueJobs([](const Json& job) { return controllers::GatePending(job); });
  }

  void EnqueuePodJobs(const Json& pod) {
    for (const JobKey& key : controllers::JobKeysForPod(pod)) Enqueue(key);
  }

  void AddHandlers() {
    for (const core::KindInfo& info : core::ManagedKinds()) {
      const WorkloadKind kind = info.kind;
      const auto own = [this, kind](const kube::CachedObject& job) {
        Enqueue({kind, controllers::Meta(*job, "namespace"), controllers::Meta(*job, "name")});
      };
      caches_.Job(kind).AddHandlers(
          {own, [own](const kube::CachedObject&, const kube::CachedObject& now) { own(now); },
           own});
    }
    const auto pod = [this](const kube::CachedObject& object) { EnqueuePodJobs(*object); };
    caches_.pods().AddHandlers(
        {pod, [pod](const kube::CachedObject&, const kube::CachedObject& now) { pod(now); }, pod});

    const auto service = [this](const kube::CachedObject& object) { EnqueueOwner(*object); };
    caches_.services().AddHandlers(
        {service,
         [service](const kube::CachedObject&, const kube::CachedObject& now) { service(now); },
         service});

    const auto event = [this](const kube::CachedObject& object) { EnqueueEventSubject(*object); };
    caches_.events().AddHandlers(
        {event, [event](const kube::CachedObject&, const kube::CachedObject& now) { event(now); },
         nullptr});

    const auto pending = [this](const kube::CachedObject&) { EnqueuePendingJobs(); };
    const kube::InformerHandlers gate{
        pending,
        [pending](const kube::CachedObject&, const kube::CachedObject& now) { pending(now); },
        pending};
    caches_.nodes().AddHandlers(gate);
    caches_.node_validations().AddHandlers(gate);

    const auto in_namespace = [this](const kube::CachedObject& ns) {
      const std::string name = controllers::Meta(*ns, "name");
      EnqueueJobs([&name](const Json& job) { return controllers::Meta(job, "namespace") == name; });
    };
    caches_.namespaces().AddHandlers(
        {in_namespace,
         [in_namespace](const kube::CachedObject& old_ns, const kube::CachedObject& now) {
           const auto labels = [](const Json& ns) {
             const auto metadata = ns.find("metadata");
             return metadata != ns.end() && metadata->contains("labels") ? (*metadata)["labels"]
                                                                         : Json();
           };
           if (labels(*old_ns) != labels(*now)) in_namespace(now);
         },
         nullptr});

    caches_.policies().AddHandlers(
        {[this](const kube::CachedObject& object) { OnPolicy(object); },
         [this](const kube::CachedObject&, const kube::CachedObject& now) { OnPolicy(now); },
         [this](const kube::CachedObject& object) {
           if (controllers::Meta(*object, "name") == controllers::kPolicyObjectName)
             OnPolicy(nullptr);
         }});
  }

  void EnqueueOwner(const Json& service) {
    const auto metadata = service.find("metadata");
    if (metadata == service.end() || !metadata->is_object()) return;
    const auto owners = metadata->find("ownerReferences");
    if (owners == metadata->end() || !owners->is_array()) return;
    for (const Json& owner : *owners) {
      if (!owner.is_object() || !owner.value("controller", false)) continue;
      if (const auto kind = core::ManagedKindOf(owner)) {
        Enqueue({*kind, controllers::Meta(service, "namespace"), owner.value("name", "")});
      }
    }
  }

  void EnqueueEventSubject(const Json& event) {
    const auto regarding = event.find("regarding");
    if (regarding == event.end() || !regarding->is_object()) return;
    if (regarding->value("kind", "") != "Pod") return;
    const auto pod = caches_.pods().Get(
        kube::ObjectKey(controllers::Meta(event, "namespace"), regarding->value("name", "")));
    if (pod) EnqueuePodJobs(*pod);
  }

  // The NcclPolicy "default" changed (null: deleted): the policy in force changes for every job.
  void OnPolicy(const kube::CachedObject& object) {
    if (object && controllers::Meta(*object, "name") != controllers::kPolicyObjectName) return;
    {
      std::lock_guard lock(policy_mutex_);
      if (!object) {
        holder_.Update(std::nullopt);
        policy_ = std::make_shared<const core::Policy>(options_.base_policy);
        policy_error_.reset();
      } else {
        policy_error_ = holder_.Update(*object);
        policy_ = std::make_shared<const core::Policy>(holder_.Current());
        if (policy_error_) {
          spdlog::warn("{}",
                       LogLine({{"msg", "NcclPolicy not applied; keeping the last good policy"},
                                {"error", *policy_error_}}));
        }
      }
    }
    SyncPolicyStatus();
    EnqueueAllJobs();
  }

  // Tells the NcclPolicy's author whether it is in force (leader only: one writer).
  void SyncPolicyStatus() {
    if (!leading_flag_.load()) return;
    const auto object = caches_.policies().Get(std::string(controllers::kPolicyObjectName));
    if (!object) return;
    std::optional<std::string> error;
    {
      std::lock_guard lock(policy_mutex_);
      error = policy_error_;
    }
    const auto patch = controllers::PolicyStatusPatch(*object, error, Now());
    if (!patch) return;
    try {
      client_->PatchStatus(
          watched::NcclPolicies().Named(std::string(controllers::kPolicyObjectName)),
          kube::PatchType::kMerge, *patch);
    } catch (const kube::ApiError& e) {
      spdlog::warn("{}", LogLine({{"msg", "NcclPolicy status not written"}, {"error", e.what()}}));
    }
  }

  std::shared_ptr<const core::Policy> CurrentPolicy() const {
    std::lock_guard lock(policy_mutex_);
    return policy_;
  }

  kube::ClientConfig config_;
  ManagerOptions options_;
  std::atomic<bool>& leading_flag_;
  std::atomic<bool>& ready_flag_;
  std::shared_ptr<kube::Client> client_;
  Caches caches_;
  std::shared_ptr<kube::EventRecorder> recorder_;
  Executor executor_;

  mutable std::mutex policy_mutex_;
  controllers::PolicyHolder holder_;
  std::shared_ptr<const core::Policy> policy_;
  std::optional<std::string> policy_error_;

  std::mutex queue_mutex_;
  kube::WorkQueue* queue_ = nullptr;

  // Events a reconcile could not write, sent before that job's next reconcile.
  std::mutex unsent_mutex_;
  std::map<std::string, std::vector<controllers::Action>> unsent_;

  std::atomic<long> reconciles_{0};
  std::atomic<long> retries_{0};
};

Manager::Manager(kube::ClientConfig config, ManagerOptions options)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(options), leading_, ready_)) {}

Manager::~Manager() = default;

RunResult Manager::Run(const kube::StopToken& stop) { return impl_->Run(stop); }

ManagerStats Manager::stats() const { return impl_->stats(); }

}  // namespace ncclguard::manager
