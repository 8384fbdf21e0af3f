#include "manager/wiring.h"

#include "controllers/observed_catalog.h"

#include "controllers/json_fields.h"
#include "controllers/labels.h"
#include "controllers/training_job_reconciler.h"
#include "core/contract.h"
#include "core/errors.h"
#include "core/gate.h"
#include "core/kinds.h"
#include "log/log.h"
#include "manager/controller_module.h"
#include "manager/manager.h"
#include "manager/projections.h"
#include "manager/state_metrics.h"
#include "manager/training_job_metrics.h"
#include "manager/waiting_keys.h"

namespace ncclguard::manager {
namespace {

using controllers::JobKey;
using core::Json;

// How long after a pod's change (or an Event about it) its job is reconciled: the changes of a
// job's pods within it are one reconcile: at 500 nodes (bench/scale.sh), 98 reconciles a job
// before, 14 after, and the controller's CPU per 1,000 jobs 29.4 -> 16.2 s.
constexpr std::chrono::milliseconds kPodChangeCoalesce{1000};
// How often the pod-log reader looks for pods due for a read, at the least.
constexpr std::chrono::seconds kPodLogPass{2};

controllers::Timestamp Now() {
  return std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
}

bool IsPolicyObject(const Json& object) {
  return controllers::Meta(object, "name") == controllers::kPolicyObjectName;
}

Json FieldOrNull(const Json* object, const char* field) {
  if (object == nullptr || !object->is_object()) return nullptr;
  const auto found = object->find(field);
  return found == object->end() ? Json(nullptr) : *found;
}

// The types whose nodesMissingTopologyLevel the NcclPolicy's status patch of `result` changes to a
// non-zero count (controllers::TopologyLevelChanges), against the status the cache holds.
std::vector<core::ObservedInstanceType> WrittenTopologyLevelChanges(
    const Caches& caches, const controllers::PolicyKey& key,
    const controllers::ReconcileResult& result) {
  for (const controllers::Action& action : result.actions) {
    const auto* patch = std::get_if<controllers::MergePatch>(&action);
    if (patch == nullptr || !patch->patch.contains("status") ||
        !patch->patch["status"].contains("observedInstanceTypes")) {
      continue;
    }
    std::vector<core::ObservedInstanceType> written;
    std::vector<core::ObservedInstanceType> published;
    try {
      written = core::ParseObservedCatalog(patch->patch);
    } catch (const core::PolicyError&) {
      return {};
    }
    try {
      if (const kube::CachedObject object = caches.policies().Get(key.name)) {
        published = core::ParseObservedCatalog(*object);
      }
    } catch (const core::PolicyError&) {
      // Unreadable (edited by hand): rewritten from the nodes, as if empty.
    }
    return controllers::TopologyLevelChanges(written, published);
  }
  return {};
}

// The counts of the learned catalog (name, GPUs, EFA devices per type): what the policy in force
// takes from the NcclPolicy's status. Nodes joining or leaving a type change the status, not these.
Json ObservedCountsOf(const Json* object) {
  const Json status = FieldOrNull(object, "status");
  const Json list = FieldOrNull(&status, "observedInstanceTypes");
  if (!list.is_array()) return nullptr;
  Json counts = Json::array();
  for (const Json& entry : list) {
    if (!entry.is_object()) continue;
    counts.push_back(Json::array({entry.value("name", Json()), entry.value("gpus", Json()),
                                  entry.value("efaDevices", Json())}));
  }
  return counts;
}

Json Labels(const Json* object) {
  const Json metadata = FieldOrNull(object, "metadata");
  return FieldOrNull(&metadata, "labels");
}

// Every cached job that `keep` accepts.
template <typename Filter>
std::vector<JobKey> Jobs(const Caches& caches, Filter&& keep) {
  std::vector<JobKey> keys;
  for (const core::KindInfo& info : core::ManagedKinds()) {
    for (const auto& job : caches.Job(info.kind).List()) {
      if (!keep(*job)) continue;
      keys.push_back(
          {info.kind, controllers::Meta(*job, "namespace"), controllers::Meta(*job, "name")});
    }
  }
  return keys;
}

// A Service's controller owner, when it is a managed kind.
std::vector<JobKey> ServiceOwner(const Json& service) {
  std::vector<JobKey> keys;
  const Json metadata = FieldOrNull(&service, "metadata");
  const Json owners = FieldOrNull(&metadata, "ownerReferences");
  if (!owners.is_array()) return keys;
  for (const Json& owner : owners) {
    if (!owner.is_object() || !owner.value("controller", false)) continue;
    if (const auto kind = core::ManagedKindOf(owner)) {
      keys.push_back({*kind, controllers::Meta(service, "namespace"), owner.value("name", "")});
    }
  }
  return keys;
}

// The jobs of the pod an Event is about (from the pod cache).
std::vector<JobKey> EventSubjectJobs(const Caches& caches, const Json& event) {
  const auto regarding = event.find("regarding");
  if (regarding == event.end() || !regarding->is_object()) return {};
  if (regarding->value("kind", "") != "Pod") return {};
  const auto pod = caches.pods().Get(
      kube::ObjectKey(controllers::Meta(event, "namespace"), regarding->value("name", "")));
  return pod ? controllers::JobKeysForPod(*pod) : std::vector<JobKey>{};
}

}  // namespace

PolicySource::PolicySource(core::Policy base,
                           std::function<void(std::shared_ptr<const core::Policy>)> changed)
    : base_(std::move(base)),
      changed_(std::move(changed)),
      current_(std::make_shared<const core::Policy>(base_)) {}

void PolicySource::Watch(kube::Informer& policies) {
  policies.AddHandlers(
      {[this](const kube::CachedObject& object) { Observe(object); },
       [this](const kube::CachedObject&, const kube::CachedObject& now) { Observe(now); },
       [this](const kube::CachedObject& object) {
         if (IsPolicyObject(*object)) Observe(nullptr);
       }});
}

std::shared_ptr<const core::Policy> PolicySource::Current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

void PolicySource::Observe(const kube::CachedObject& object) {
  if (object && !IsPolicyObject(*object)) return;
  std::lock_guard lock(mutex_);
  if (!object) {
    holder_.Update(std::nullopt);
    current_ = std::make_shared<const core::Policy>(base_);
    if (changed_) changed_(current_);
    return;
  }
  if (const auto error = holder_.Update(*object)) {
    log::Warn("NcclPolicy not applied; keeping the last good policy",
              {{"key", controllers::Meta(*object, "name")}, {"error", *error}});
  }
  current_ = std::make_shared<const core::Policy>(holder_.Current());
  if (changed_) changed_(current_);
}

bool ManagedJob(const Caches& caches, const JobKey& key) {
  const auto ns = caches.namespaces().Get(key.namespace_);
  if (!ns || controllers::Label(*ns, core::kEnabledNamespaceLabel) != std::string("true")) {
    return false;
  }
  const auto job = caches.Job(key.kind).Get(kube::ObjectKey(key.namespace_, key.name));
  if (!job) return false;
  return core::IsManagedJob(*job, key.kind);
}

// The jobs of the reader pods a NodeValidation's status.ras names (controllers::JobKeysForPod of
// each pod in the cache).
// A NodeValidation's status.ras, or null; looked up in place (every probe report passes here).
const Json* RasOf(const Json* validation) {
  if (validation == nullptr || !validation->is_object()) return nullptr;
  const auto status = validation->find("status");
  if (status == validation->end() || !status->is_object()) return nullptr;
  const auto ras = status->find("ras");
  return ras != status->end() ? &*ras : nullptr;
}

std::vector<JobKey> RasReaderJobs(const Caches& caches, const Json& validation) {
  std::vector<JobKey> keys;
  const Json* ras = RasOf(&validation);
  if (ras == nullptr || !ras->is_object()) return keys;
  const auto pods = ras->find("pods");
  if (pods == ras->end() || !pods->is_array()) return keys;
  for (const Json& entry : *pods) {
    if (!entry.is_object()) continue;
    const kube::CachedObject pod = caches.pods().Get(kube::ObjectKey(
        controllers::StringField(entry, "namespace"), controllers::StringField(entry, "pod")));
    if (!pod) continue;
    for (JobKey& key : controllers::JobKeysForPod(*pod)) keys.push_back(std::move(key));
  }
  return keys;
}

ControllerSpec<JobKey> TrainingJobController(const Caches& caches, const PolicySource& policy,
                                             int workers, const PodLogStore* pod_logs,
                                             Metrics* metrics) {
  ControllerSpec<JobKey> spec;
  spec.name = "trainingjob";
  spec.workers = workers;
  for (const core::KindInfo& info : core::ManagedKinds()) {
    const core::WorkloadKind kind = info.kind;
    spec.watches.push_back({&caches.Job(kind),
                            [kind](const Json& job) {
                              return std::vector<JobKey>{{kind, controllers::Meta(job, "namespace"),
                                                          controllers::Meta(job, "name")}};
                            },
                            nullptr});
  }
  // A pod's changes and the Events about it tell the job's diagnoses: coalesced. A pod that
  // carries the pod-level gate is let go at once (its job may be released already).
  const auto gated = [](const Change& change) {
    return change.new_object != nullptr &&
           core::HasSchedulingGate(*change.new_object, core::kSchedulingGate);
  };
  spec.watches.push_back({&caches.pods(), controllers::JobKeysForPod, gated});
  spec.watches.push_back({&caches.pods(), controllers::JobKeysForPod,
                          [gated](const Change& change) { return !gated(change); }, false,
                          kPodChangeCoalesce});
  spec.watches.push_back({&caches.services(), ServiceOwner, nullptr});
  spec.watches.push_back({&caches.events(),
                          [&caches](const Json& event) { return EventSubjectJobs(caches, event); },
                          [](const Change& change) { return change.new_object != nullptr; }, false,
                          kPodChangeCoalesce});
  const auto pending = [&caches](const Json&) {
    return Jobs(caches, [](const Json& job) { return controllers::GatePending(job); });
  };
  // What a probe read of NCCL's RAS (a NodeValidation's status.ras): the jobs of the reader pods
  // whose entries changed.
  spec.watches.push_back(
      {&caches.node_validations(),
       [&caches](const Json& validation) { return RasReaderJobs(caches, validation); },
       [](const Change& change) {
         const Json* before = RasOf(change.old_object);
         const Json* after = RasOf(change.new_object);
         if (before == nullptr || after == nullptr) return before != after;
         return *before != *after;
       },
       false, kPodChangeCoalesce});
  // A node's change wakes the held jobs its instance type's count can release, not every held
  // job.
  auto waiting = std::make_shared<WaitingKeys<JobKey>>();
  for (Watch<JobKey>& watch : NodeChangeWatches<JobKey>(caches, policy, waiting)) {
    spec.watches.push_back(std::move(watch));
  }
  // A held TrainJob's demand is its runtime's pods.
  for (const core::KindInfo& info : core::TemplateKinds()) {
    spec.watches.push_back({&caches.Get(watched::ForKind(info.kind)), pending, nullptr});
  }
  spec.watches.push_back({&caches.namespaces(),
                          [&caches](const Json& ns) {
                            const std::string name = controllers::Meta(ns, "name");
                            return Jobs(caches, [&name](const Json& job) {
                              return controllers::Meta(job, "namespace") == name;
                            });
                          },
                          // A new namespace, or its labels changed (ncclguard.io/enabled).
                          [](const Change& change) {
                            return change.new_object != nullptr &&
                                   (change.old_object == nullptr ||
                                    Labels(change.old_object) != Labels(change.new_object));
                          }});
  // The policy in force changed (PolicySource has it already): every job. The controller's own
  // status writes are not a change of policy.
  spec.watches.push_back(
      {&caches.policies(),
       [&caches](const Json&) { return Jobs(caches, [](const Json&) { return true; }); },
       [](const Change& change) {
         return IsPolicyObject(change.object()) &&
                (change.old_object == nullptr || change.new_object == nullptr ||
                 FieldOrNull(change.old_object, "spec") != FieldOrNull(change.new_object, "spec") ||
                 ObservedCountsOf(change.old_object) != ObservedCountsOf(change.new_object));
       }});
  spec.all_keys = [&caches] { return Jobs(caches, [](const Json&) { return true; }); };
  spec.reconcile = [&caches, &policy, pod_logs, waiting](const JobKey& key) {
    const CacheView view(caches, policy.Current(), pod_logs);
    controllers::ReconcileResult result = controllers::ReconcileTrainingJob(key, view, Now());
    waiting->Record(key, result.waiting_for);
    return result;
  };
  if (metrics != nullptr) {
    auto counted = std::make_shared<CountedVersions>();
    spec.observe = [&caches, metrics, counted](
                       const JobKey& key, const controllers::ReconcileResult& result) -> Applied {
      if (!PatchesJob(key, result)) return nullptr;  // most reconciles: nothing to read
      const kube::CachedObject cached =
          caches.Job(key.kind).Get(kube::ObjectKey(key.namespace_, key.name));
      std::optional<Json> job = cached ? std::optional<Json>(*cached) : std::nullopt;
      const controllers::Timestamp now = Now();
      const JobChanges all = ChangesOf(key, job, result, now);
      if (!all.released && all.new_diagnoses.empty() && !all.transport) return nullptr;
      const std::string version = job ? kube::ObjectKey(key.namespace_, key.name) + "@" +
                                            controllers::Meta(*job, "resourceVersion")
                                      : std::string();
      return
          [key, job = std::move(job), result, now, metrics, counted, version](std::size_t applied) {
            const JobChanges changes = ChangesOf(key, job, result, now, applied);
            if (!changes.released && changes.new_diagnoses.empty() && !changes.transport) return;
            if (!version.empty() && !counted->First(version)) return;  // counted from this version
            Count(changes, key.kind, *metrics);
          };
    };
  }
  return spec;
}

ControllerSpec<controllers::PolicyKey> NcclPolicyController(const Caches& caches) {
  using controllers::PolicyKey;
  ControllerSpec<PolicyKey> spec;
  spec.name = "ncclpolicy";
  spec.workers = 1;
  spec.watches.push_back({&caches.policies(),
                          [](const Json& object) {
                            return IsPolicyObject(object)
                                       ? std::vector<PolicyKey>{{controllers::Meta(object, "name")}}
                                       : std::vector<PolicyKey>{};
                          },
                          nullptr});
  spec.all_keys = [&caches] {
    return caches.policies().Get(std::string(controllers::kPolicyObjectName))
               ? std::vector<PolicyKey>{{std::string(controllers::kPolicyObjectName)}}
               : std::vector<PolicyKey>{};
  };
  // What the nodes advertise: the catalog the policy's status publishes.
  spec.watches.push_back(
      {&caches.nodes(),
       [](const Json&) {
         return std::vector<PolicyKey>{{std::string(controllers::kPolicyObjectName)}};
       },
       [](const Change& change) {
         return change.old_object == nullptr || change.new_object == nullptr ||
                controllers::ObservedFieldsDiffer(*change.old_object, *change.new_object);
       }});
  spec.reconcile = [&caches](const PolicyKey& key) {
    const kube::CachedObject object = caches.policies().Get(key.name);
    // Without the NcclPolicy "default" there is no status to publish the catalog in: no pass.
    if (key.name != controllers::kPolicyObjectName || !object) {
      return controllers::ReconcileNcclPolicyWithCatalog(key, std::nullopt, {}, Now());
    }
    // The nodes one decoded at a time: a rack of new nodes reconciles this often, and 5,000
    // nodes decoded at once (and copied) were the controller's peak memory.
    controllers::InstanceTypeObserver observer;
    caches.nodes().ForEach([&observer](const Json& node) { observer.Add(node); });
    return controllers::ReconcileNcclPolicyWithCatalog(key, std::optional<Json>(*object),
                                                       std::move(observer).Result(), Now());
  };
  // Once the status says more (or other) nodes of a type lack a topology level, the log says so.
  spec.observe = [&caches](const PolicyKey& key,
                           const controllers::ReconcileResult& result) -> Applied {
    const std::vector<core::ObservedInstanceType> changed =
        WrittenTopologyLevelChanges(caches, key, result);
    if (changed.empty()) return nullptr;
    return [changed](std::size_t) {
      for (const core::ObservedInstanceType& type : changed) {
        std::string levels;
        for (const std::string& level : type.topology_levels) {
          levels += (levels.empty() ? "" : ",") + level;
        }
        log::Warn(
            "nodes lack a topology level their instance type's other nodes carry: Kueue's "
            "topology-aware scheduling leaves them out (ncclguard audit names them)",
            {{"instanceType", type.name},
             {"nodesMissingTopologyLevel", type.nodes_missing_topology_level},
             {"nodes", type.nodes},
             {"topologyLevels", levels}});
      }
    };
  };
  return spec;
}

namespace {

// While leading, every few seconds: the pods due for a log read (PodLogReader), then their jobs
// reconciled with what was read.
Runnable PodLogReading(ModuleContext& context, std::shared_ptr<PodLogStore> store,
                       Controller& training_jobs) {
  auto reader = std::make_shared<PodLogReader>(context.options().pod_log_limits,
                                               KubePodLogSource(context.client()), *store,
                                               &context.metrics());
  const Caches& caches = context.caches();
  return {"podlogs", true,
          [store, reader, &caches, &training_jobs](const kube::StopToken& leading) {
            const PodLogReader::Pods pods = [&caches](const auto& visit) {
              caches.pods().ForEachWhile(visit);
            };
            const PodLogReader::Live live = [&caches](const std::string& pod_key) {
              return caches.pods().Contains(pod_key);
            };
            std::chrono::steady_clock::duration wait;
            do {
              const auto managed = [&caches](const JobKey& key) { return ManagedJob(caches, key); };
              const auto started = std::chrono::steady_clock::now();
              for (const JobKey& key : reader->Tick(pods, live, managed, Now())) {
                training_jobs.Enqueue(key.ToString());
              }
              // A pass that found little due visits every pod: at 100,000 pods that is most of a
              // second, so the reader waits 20 times its pass, keeping it to 5% of a core.
              wait = std::max<std::chrono::steady_clock::duration>(
                  kPodLogPass, 20 * (std::chrono::steady_clock::now() - started));
            } while (!leading.WaitFor(wait));
          }};
}

// The training-job controller: rendezvous Service, gate, diagnoses and conditions for every
// managed kind of core/kinds.h, and the pod-log reader behind the log diagnoses.
ControllerModule DeclareTrainingJobs() {
  ControllerModule module;
  module.name = "trainingjob";
  module.summary =
      "rendezvous Services, the gate, diagnoses and conditions of the managed training jobs";
  for (const core::KindInfo& info : core::ManagedKinds()) {
    const kube::ResourceRef resource = watched::ForKind(info.kind);
    module.reads.push_back({resource, JobProjection(info.kind), {}});
    module.access.push_back(
        Access(resource.group, {resource.resource}, {"get", "patch"},
               "training-job reconciler: reading one job, the gate's release patch"));
    module.access.push_back(Access(resource.group, {resource.resource + "/status"}, {"patch"},
                                   "training-job reconciler: the NcclPreflight and NcclDiagnosis "
                                   "conditions"));
  }
  // Kubeflow Trainer's runtimes: the pods of the TrainJobs that name them (whole objects: a
  // runtime is read as the Trainer reads it, and a cluster has a handful).
  for (const core::KindInfo& info : core::TemplateKinds()) {
    module.reads.push_back({watched::ForKind(info.kind), nullptr, {}});
  }
  module.reads.push_back(
      {kube::resources::Pods(), PodProjection(), {{kPodsByJobIndex, PodsByJob()}}});
  module.reads.push_back({kube::resources::Services(), ServiceProjection(), {}});
  module.reads.push_back({kube::resources::Namespaces(), NamespaceProjection(), {}});
  module.reads.push_back({kube::resources::Events(),
                          EventProjection(),
                          {{kEventsByRegarding, EventsByRegarding()}},
                          ReadEvent});
  module.reads.push_back({watched::NcclPolicies(), nullptr, {}});
  module.access.push_back(
      Access("", {"pods/log"}, {"get"},
             "log diagnoses: a bounded tail of the managed training pods' logs"));
  module.access.push_back(Access("", {"pods"}, {"patch"},
                                 "pod-level gate: lift the ncclguard.io/validated-nodes scheduling "
                                 "gate from the pods of a released job"));
  module.access.push_back(Access("", {"services"}, {"create", "patch"},
                                 "rendezvous Service: create it, put back a drifted "
                                 "selector/port/annotation"));
  module.install = [](ModuleContext& context) {
    const ManagerOptions& options = context.options();
    auto pod_logs = options.read_pod_logs ? std::make_shared<PodLogStore>() : nullptr;
    Controller& training_jobs = context.AddController(TrainingJobController(
        context.caches(), context.policy(), options.workers, pod_logs.get(), &context.metrics()));
    if (pod_logs) context.Add(PodLogReading(context, pod_logs, training_jobs));
    const Caches& caches = context.caches();
    context.AddStateMetrics([&caches](std::vector<prometheus::MetricFamily>& out) {
      std::map<core::WorkloadKind, EachObject> jobs;
      for (const core::KindInfo& info : core::ManagedKinds()) {
        jobs.emplace(info.kind, EachIn(caches.Job(info.kind)));
      }
      out.push_back(HeldJobsFamily(jobs));
      out.push_back(NcclHealthFamily(jobs));
      out.push_back(PlacementFamily(jobs));
    });
  };
  return module;
}
NCCLGUARD_REGISTER(DeclareTrainingJobs);

// The NcclPolicy "default": its Accepted condition.
ControllerModule DeclareNcclPolicy() {
  ControllerModule module;
  module.name = "ncclpolicy";
  module.summary =
      "the Accepted condition of the NcclPolicy \"default\" and the instance types learned from "
      "the nodes (status.observedInstanceTypes)";
  module.reads.push_back({watched::NcclPolicies(), nullptr, {}});
  // The instance-type label (the manager keeps labels) and the device plugins' counts.
  module.reads.push_back({kube::resources::Nodes(), ObservedNodeProjection(), {}});
  module.access.push_back(Access(std::string(core::kApiGroup), {"ncclpolicies/status"}, {"patch"},
                                 "policy reload: the NcclPolicy's Accepted condition"));
  module.install = [](ModuleContext& context) {
    context.AddController(NcclPolicyController(context.caches()));
  };
  return module;
}
NCCLGUARD_REGISTER(DeclareNcclPolicy);

}  // namespace

}  // namespace ncclguard::manager
