#include "manager/audit_controller.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <set>

#include "controllers/labels.h"
#include "core/contract.h"
#include "core/kinds.h"
#include "core/policy_report.h"
#include "kube/errors.h"
#include "kube/work_queue.h"
#include "log/log.h"
#include "manager/cache.h"
#include "manager/controller_module.h"
#include "manager/manager.h"
#include "manager/projections.h"
#include "manager/wiring.h"

namespace ncclguard::manager {

using core::Json;

kube::ResourceRef PolicyReportResource() {
  return {std::string(core::kPolicyReportGroup), "v1alpha2", "policyreports", true, "", ""};
}

namespace {

const Json* ReportField(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

Json ReportContent(const Json& report) {
  Json content = Json::object();
  for (const char* key : {"apiVersion", "kind", "summary", "results"}) {
    if (const Json* value = ReportField(report, key)) content[key] = *value;
  }
  if (const Json* metadata = ReportField(report, "metadata")) {
    for (const char* key : {"name", "namespace", "labels"}) {
      if (const Json* value = ReportField(*metadata, key)) content["metadata"][key] = *value;
    }
  }
  return content;
}

std::string ReportName(const Json& report) { return controllers::Meta(report, "name"); }

}  // namespace

std::string ReportDigest(const Json& report) {
  // core::Json keeps keys in insertion order, and the API server returns them in its own: the
  // digest is of the content with its keys sorted.
  const nlohmann::json sorted = nlohmann::json::parse(ReportContent(report).dump());
  return std::to_string(std::hash<std::string>{}(sorted.dump()));
}

kube::Projection ReportDigestProjection() {
  return [](const Json& report) {
    Json out{{"digest", ReportDigest(report)}};
    if (const Json* metadata = ReportField(report, "metadata")) {
      for (const char* key : {"name", "namespace"}) {
        if (const Json* value = ReportField(*metadata, key)) out["metadata"][key] = *value;
      }
    }
    return out;
  };
}

ReportWrites PlanReportWrites(const std::vector<Json>& desired,
                              const std::map<std::string, std::string>& existing,
                              const std::map<std::string, std::string>& last_applied) {
  ReportWrites writes;
  const bool nothing_audited =
      desired.empty() || (desired.size() == 1 && desired.front().value("results", Json()).empty());
  if (nothing_audited && existing.empty()) return writes;
  std::set<std::string> wanted;
  for (const Json& report : desired) {
    const std::string name = ReportName(report);
    wanted.insert(name);
    const std::string digest = ReportDigest(report);
    const auto applied = last_applied.find(name);
    const auto stored = existing.find(name);
    const bool same = applied != last_applied.end()
                          ? applied->second == digest
                          : stored != existing.end() && stored->second == digest;
    if (!same) writes.apply.push_back(report);
  }
  for (const auto& [name, digest] : existing) {
    if (!wanted.contains(name)) writes.remove.push_back(name);
  }
  return writes;
}

void AuditTally::Add(const std::vector<core::ObjectAudit>& audits) {
  for (const core::ObjectAudit& audit : audits) {
    if (audit.findings.empty()) results[std::string(AuditResultName(core::AuditResult::Pass))] += 1;
    for (const core::AuditFinding& finding : audit.findings) {
      results[std::string(AuditResultName(finding.result))] += 1;
      findings[finding.finding.rule] += 1;
    }
  }
}

void AuditTally::Add(const AuditTally& other) {
  for (const auto& [result, count] : other.results) results[result] += count;
  for (const auto& [rule, count] : other.findings) findings[rule] += count;
}

bool AuditedFieldsChanged(const Json* old_object, const Json* new_object) {
  if (old_object == nullptr || new_object == nullptr) return true;
  const auto audited = [](const Json& object) {
    Json kept = Json::object();
    if (const Json* spec = ReportField(object, "spec")) kept["spec"] = *spec;
    if (const Json* metadata = ReportField(object, "metadata")) {
      for (const char* key : {"labels", "annotations", "ownerReferences"}) {
        if (const Json* value = ReportField(*metadata, key)) kept[key] = *value;
      }
    }
    return kept;
  };
  return audited(*old_object) != audited(*new_object);
}

namespace {

using Clock = std::chrono::steady_clock;

// The work queue's key that audits every namespace (no namespace is named "").
const std::string kEveryNamespace;
// While the reports are not served (or not listed yet): how often that is looked at again.
constexpr std::chrono::seconds kServedRetry{5};
// How long a changed namespace waits for more changes before it is audited and written.
constexpr std::chrono::seconds kCoalesce{1};

std::vector<std::string> InNamespace(const Json& object) {
  return {controllers::Meta(object, "namespace")};
}

// What the audit shares between the caches' handlers (which queue namespaces), the scrapes (which
// read its counts) and the run while leading.
class AuditState {
 public:
  // Queues `namespace_` while running, kCoalesce after the first change that is not yet audited
  // (the pods of a job arrive together: one audit and one write for them all); dropped while not
  // running (a run starts with every namespace).
  void Queue(const std::string& namespace_) {
    std::lock_guard lock(mutex_);
    if (queue_ != nullptr) queue_->AddAfter(namespace_, kCoalesce);
  }
  void Attach(kube::WorkQueue* queue) {
    std::lock_guard lock(mutex_);
    queue_ = queue;
  }
  void Detach() {
    std::lock_guard lock(mutex_);
    queue_ = nullptr;
    tallies_.clear();
    served_ = false;
  }
  void SetTally(const std::string& namespace_, AuditTally tally) {
    std::lock_guard lock(mutex_);
    if (tally.results.empty()) {
      tallies_.erase(namespace_);
    } else {
      tallies_[namespace_] = std::move(tally);
    }
  }
  void SetServed(bool served) {
    std::lock_guard lock(mutex_);
    served_ = served;
  }

  void Families(std::vector<prometheus::MetricFamily>& out) const {
    AuditTally total;
    bool served = false;
    {
      std::lock_guard lock(mutex_);
      for (const auto& [namespace_, tally] : tallies_) total.Add(tally);
      served = served_;
    }
    const auto gauge = [](const char* name, const char* help, const char* label,
                          const std::map<std::string, double>& counts) {
      prometheus::MetricFamily family{name, help, prometheus::MetricType::Gauge, {}};
      for (const auto& [value, count] : counts) {
        prometheus::ClientMetric metric;
        if (label != nullptr) metric.label.push_back({label, value});
        metric.gauge.value = count;
        family.metric.push_back(std::move(metric));
      }
      return family;
    };
    std::map<std::string, double> results{{"fail", 0}, {"pass", 0}, {"warn", 0}};
    for (const auto& [result, count] : total.results) results[result] = count;
    out.push_back(gauge("ncclguard_audit_results",
                        "Results in the background audit's PolicyReports, by result (pass, warn, "
                        "fail), over every audited namespace.",
                        "result", results));
    out.push_back(gauge("ncclguard_audit_findings",
                        "Findings in the background audit's PolicyReports, by rule, over every "
                        "audited namespace (absent when 0).",
                        "rule", total.findings));
    out.push_back(gauge("ncclguard_audit_reports_served",
                        "1 when wgpolicyk8s.io/v1alpha2 PolicyReports are served (the CRD is "
                        "installed) and the background audit writes them, else 0.",
                        nullptr, {{"", served ? 1.0 : 0.0}}));
  }

 private:
  mutable std::mutex mutex_;
  kube::WorkQueue* queue_ = nullptr;
  std::map<std::string, AuditTally> tallies_;
  bool served_ = false;
};

// The informers the audit reads objects from, by kAuditNamespaceIndex.
std::vector<kube::Informer*> AuditedInformers(const Caches& caches) {
  std::vector<kube::Informer*> informers{&caches.pods()};
  for (const core::KindInfo& info : core::ManagedKinds())
    informers.push_back(&caches.Job(info.kind));
  return informers;
}

// One leadership's run: its own queue of namespaces and an informer of ncclguard's reports.
class AuditRun {
 public:
  AuditRun(ModuleContext& context, std::shared_ptr<AuditState> state)
      : caches_(context.caches()),
        policy_(context.policy()),
        client_(context.client()),
        metrics_(context.metrics()),
        own_namespace_(context.options().lease_namespace),
        sync_timeout_(context.options().cache_sync_timeout),
        state_(std::move(state)) {}

  void Run(const kube::StopToken& leading) {
    kube::InformerOptions options;
    options.resource = PolicyReportResource();
    options.label_selector =
        "app.kubernetes.io/managed-by=" + std::string(core::kPolicyReportManagedBy);
    options.projection = ReportDigestProjection();
    options.not_served_retry = kServedRetry;
    kube::Informer reports(client_, options);
    reports.AddIndex(kAuditNamespaceIndex, InNamespace);
    // A report deleted or changed by someone else is written again.
    const auto changed = [this](const kube::CachedObject& report) {
      const std::string key = kube::ObjectKey(*report);
      {
        std::lock_guard lock(applied_mutex_);
        const auto applied = last_applied_.find(key);
        if (applied == last_applied_.end() || applied->second == report->value("digest", "")) {
          return;
        }
        last_applied_.erase(applied);
      }
      state_->Queue(controllers::Meta(*report, "namespace"));
    };
    reports.AddHandlers(
        {changed,
         [changed](const kube::CachedObject&, const kube::CachedObject& now) { changed(now); },
         [this](const kube::CachedObject& report) {
           {
             std::lock_guard lock(applied_mutex_);
             last_applied_.erase(kube::ObjectKey(*report));
           }
           state_->Queue(controllers::Meta(*report, "namespace"));
         }});
    reports_ = &reports;
    kube::WorkQueue queue;
    queue_ = &queue;
    reports.Start();
    state_->Attach(&queue);
    // The first pass once the reports are read (or known not served), rather than 5 s later, and
    // once the caches hold every workload: a report of half-listed caches would be written twice.
    reports.WaitForSyncOrNotServed(sync_timeout_);
    std::vector<kube::Informer*> informers = AuditedInformers(caches_);
    informers.push_back(&caches_.namespaces());
    for (kube::Informer* informer : informers) informer->WaitForSyncOrNotServed(sync_timeout_);
    queue.Add(kEveryNamespace);
    const int wake = leading.OnStop([&queue] { queue.ShutDown(); });
    while (const std::optional<std::string> key = queue.Get()) {
      if (*key == kEveryNamespace) {
        AuditEverything();
      } else if (reports.HasSynced()) {
        state_->SetServed(true);  // before AuditEverything's next look, when they came meanwhile
        Audit(*key);
      }
      queue.Done(*key);
    }
    leading.RemoveOnStop(wake);
    state_->Detach();
    reports.Stop();
  }

 private:
  // Queues every namespace, then itself after the policy's interval; while the reports are not
  // served, only looks again soon.
  void AuditEverything() {
    if (!reports_->HasSynced()) {
      if (reports_->NotServed() && !said_not_served_) {
        log::Warn(
            "PolicyReports are not served: the background audit writes none until the "
            "wgpolicyk8s.io/v1alpha2 PolicyReport CRD is installed (Kyverno and Policy Reporter "
            "install it; alone: kubectl apply --server-side -f "
            "https://raw.githubusercontent.com/kyverno/kyverno/v1.19.1/config/crds/policyreport/"
            "wgpolicyk8s.io_policyreports.yaml); looking again every 5 s",
            {{"resource", "policyreports.wgpolicyk8s.io"}});
        said_not_served_ = true;
      }
      state_->SetServed(false);
      queue_->AddAfter(kEveryNamespace, kServedRetry);
      return;
    }
    if (said_not_served_) {
      log::Info("PolicyReports are served now: the background audit writes them",
                {{"resource", "policyreports.wgpolicyk8s.io"}});
      said_not_served_ = false;
    }
    state_->SetServed(true);
    std::set<std::string> namespaces;
    for (const kube::CachedObject& ns : caches_.namespaces().List()) {
      namespaces.insert(controllers::Meta(*ns, "name"));
    }
    for (const kube::CachedObject& report : reports_->List()) {
      namespaces.insert(controllers::Meta(*report, "namespace"));
    }
    for (const std::string& ns : namespaces) queue_->Add(ns);
    const int interval = std::max(1, policy_.Current()->audit.interval_seconds);
    queue_->AddAfter(kEveryNamespace, std::chrono::seconds(interval));
  }

  // Evaluates one namespace's workloads and writes what changed of its reports.
  void Audit(const std::string& namespace_) {
    const Clock::time_point started = Clock::now();
    const std::shared_ptr<const core::Policy> policy = policy_.Current();
    std::vector<core::ObjectAudit> audits;
    std::vector<Json> desired;
    if (policy->audit.Audits(namespace_, own_namespace_)) {
      const Caches& caches = caches_;
      const core::RuntimeLookup runtimes = [&caches](const core::RuntimeRef& ref,
                                                     std::string_view ns) {
        return RuntimeIn(caches, ref, ns);
      };
      for (kube::Informer* informer : AuditedInformers(caches_)) {
        for (const kube::CachedObject& object :
             informer->ByIndex(kAuditNamespaceIndex, namespace_)) {
          try {
            if (auto audit = core::AuditObject(*object, *policy, runtimes)) {
              audits.push_back(std::move(*audit));
            }
          } catch (const std::exception& e) {
            // A field of the wrong type (core::InputError): the webhook refuses such an object.
            log::Debug("not audited: unreadable object",
                       {{"key", kube::ObjectKey(*object)}, {"error", e.what()}});
          }
        }
      }
      AuditTally tally;
      tally.Add(audits);
      state_->SetTally(namespace_, std::move(tally));
      desired = core::PolicyReportsFor(namespace_, std::move(audits));
    } else {
      state_->SetTally(namespace_, {});
    }
    std::map<std::string, std::string> existing;
    for (const kube::CachedObject& report : reports_->ByIndex(kAuditNamespaceIndex, namespace_)) {
      existing.emplace(controllers::Meta(*report, "name"), report->value("digest", ""));
    }
    std::map<std::string, std::string> applied;
    {
      std::lock_guard lock(applied_mutex_);
      const std::string prefix = namespace_ + "/";
      for (auto it = last_applied_.lower_bound(prefix);
           it != last_applied_.end() && it->first.starts_with(prefix); ++it) {
        applied.emplace(it->first.substr(prefix.size()), it->second);
      }
    }
    try {
      Write(namespace_, PlanReportWrites(desired, existing, applied));
      queue_->Forget(namespace_);
    } catch (const std::exception& e) {
      log::Warn("writing PolicyReports failed; retrying with backoff",
                {{"namespace", namespace_}, {"error", e.what()}});
      queue_->AddRateLimited(namespace_);
    }
    metrics_.ObserveAuditScan(std::chrono::duration<double>(Clock::now() - started).count());
  }

  void Write(const std::string& namespace_, const ReportWrites& writes) {
    const kube::ResourceRef reports = PolicyReportResource().In(namespace_);
    for (const Json& report : writes.apply) {
      const std::string name = controllers::Meta(report, "name");
      client_->Apply(reports.Named(name), report, std::string(core::kPolicyReportManager),
                     /*force=*/true);
      metrics_.CountReportWrite(ReportWrite::kApply);
      log::Info("PolicyReport applied", {{"namespace", namespace_}, {"name", name}});
      std::lock_guard lock(applied_mutex_);
      last_applied_[namespace_ + "/" + name] = ReportDigest(report);
    }
    for (const std::string& name : writes.remove) {
      try {
        client_->Delete(reports.Named(name));
      } catch (const kube::ApiError& e) {
        if (e.code() != kube::ErrorCode::kNotFound) throw;
      }
      metrics_.CountReportWrite(ReportWrite::kDelete);
      log::Info("PolicyReport deleted", {{"namespace", namespace_}, {"name", name}});
      std::lock_guard lock(applied_mutex_);
      last_applied_.erase(namespace_ + "/" + name);
    }
  }

  const Caches& caches_;
  const PolicySource& policy_;
  std::shared_ptr<kube::Client> client_;
  Metrics& metrics_;
  std::string own_namespace_;
  std::chrono::milliseconds sync_timeout_;
  std::shared_ptr<AuditState> state_;
  kube::Informer* reports_ = nullptr;  // while running
  kube::WorkQueue* queue_ = nullptr;   // while running
  bool said_not_served_ = false;
  std::mutex applied_mutex_;
  // "<namespace>/<name>" to the digest this process last applied.
  std::map<std::string, std::string> last_applied_;
};

// Queues the namespace of a changed object the audit reads; every namespace for a change of the
// policy or of a Trainer runtime (the TrainJobs naming it may be anywhere).
void WatchForChanges(const Caches& caches, const std::shared_ptr<AuditState>& state) {
  const auto queue_namespace = [state](const kube::CachedObject& object) {
    state->Queue(controllers::Meta(*object, "namespace"));
  };
  for (kube::Informer* informer : AuditedInformers(caches)) {
    const bool pods = informer == &caches.pods();
    const auto relevant = [pods](const kube::CachedObject& object) {
      return !pods || IsAuditedPod(*object);
    };
    informer->AddHandlers({[queue_namespace, relevant](const kube::CachedObject& object) {
                             if (relevant(object)) queue_namespace(object);
                           },
                           [queue_namespace, relevant](const kube::CachedObject& old_object,
                                                       const kube::CachedObject& new_object) {
                             if ((relevant(old_object) || relevant(new_object)) &&
                                 AuditedFieldsChanged(old_object.get(), new_object.get())) {
                               queue_namespace(new_object);
                             }
                           },
                           [queue_namespace, relevant](const kube::CachedObject& object) {
                             if (relevant(object)) queue_namespace(object);
                           }});
  }
  const auto everything = [state, &caches] {
    for (const kube::CachedObject& ns : caches.namespaces().List()) {
      state->Queue(controllers::Meta(*ns, "name"));
    }
  };
  const auto any = [everything](const kube::CachedObject&) { everything(); };
  const auto any_update = [everything](const kube::CachedObject& old_object,
                                       const kube::CachedObject& new_object) {
    if (AuditedFieldsChanged(old_object.get(), new_object.get())) everything();
  };
  for (const core::KindInfo& info : core::TemplateKinds()) {
    caches.Get(watched::ForKind(info.kind)).AddHandlers({any, any_update, any});
  }
  // After PolicySource's own handlers (the manager adds those first): the new policy is in force.
  const auto policy_update = [everything](const kube::CachedObject& old_object,
                                          const kube::CachedObject& new_object) {
    if (old_object->value("spec", Json()) != new_object->value("spec", Json())) everything();
  };
  caches.policies().AddHandlers({any, policy_update, any});
}

ControllerModule DeclarePolicyReports() {
  ControllerModule module;
  module.name = "audit";
  module.summary =
      "background audit: the workloads that exist, evaluated by every rule, as a PolicyReport "
      "(wgpolicyk8s.io/v1alpha2) per namespace";
  module.flag = "policy-reports";
  module.flag_default = true;
  const auto by_namespace = [](const Json& object) {
    return std::vector<std::string>{controllers::Meta(object, "namespace")};
  };
  for (const core::KindInfo& info : core::ManagedKinds()) {
    module.reads.push_back({watched::ForKind(info.kind),
                            JobProjection(info.kind),
                            {{kAuditNamespaceIndex, by_namespace}}});
  }
  module.reads.push_back(
      {kube::resources::Pods(),
       AuditPodProjection(),
       {{kAuditNamespaceIndex, [](const Json& pod) {
           return IsAuditedPod(pod) ? std::vector<std::string>{controllers::Meta(pod, "namespace")}
                                    : std::vector<std::string>{};
         }}}});
  // A TrainJob is judged with its runtime's pods (whole: a cluster has a handful).
  for (const core::KindInfo& info : core::TemplateKinds()) {
    module.reads.push_back({watched::ForKind(info.kind), nullptr, {}});
  }
  module.reads.push_back({kube::resources::Namespaces(), NamespaceProjection(), {}});
  module.reads.push_back({watched::NcclPolicies(), nullptr, {}});
  module.access.push_back(Access(std::string(core::kPolicyReportGroup), {"policyreports"},
                                 {"get", "list", "watch", "create", "patch", "delete"},
                                 "background audit: its PolicyReports (label "
                                 "app.kubernetes.io/managed-by=ncclguard), applied and pruned"));
  module.install = [](ModuleContext& context) {
    auto state = std::make_shared<AuditState>();
    WatchForChanges(context.caches(), state);
    context.AddStateMetrics(
        [state](std::vector<prometheus::MetricFamily>& out) { state->Families(out); });
    context.Add({"audit", true, [&context, state](const kube::StopToken& leading) {
                   AuditRun run(context, state);
                   run.Run(leading);
                 }});
  };
  return module;
}
NCCLGUARD_REGISTER(DeclarePolicyReports);

}  // namespace

}  // namespace ncclguard::manager
