#include "manager/cache.h"

#include "controllers/gate.h"

#include <chrono>
#include <stdexcept>

#include "controllers/labels.h"
#include "core/contract.h"
#include "core/errors.h"
#include "core/json_access.h"
#include "core/kueue.h"
#include "core/pod_spec.h"
#include "log/log.h"
#include "manager/kueue_topology.h"
#include "manager/manager.h"
#include "manager/projections.h"

namespace ncclguard::manager {
namespace {

using core::Json;

std::optional<Json> Copy(const kube::CachedObject& object) {
  if (!object) return std::nullopt;
  return *object;
}

std::string Key(const kube::ResourceRef& resource) {
  kube::ResourceRef all = resource;
  all.namespace_.clear();
  all.name.clear();
  return all.CollectionPath();
}

// Into `into`, what `from` has that `into` lacks (objects key by key; two arrays of objects of
// one length, as two projections keep of one list, entry by entry).
void MergeInto(Json& into, const Json& from) {
  if (into.is_array() && from.is_array() && into.size() == from.size()) {
    for (std::size_t i = 0; i < into.size(); ++i) {
      if (into[i].is_object() && from[i].is_object()) MergeInto(into[i], from[i]);
    }
    return;
  }
  if (!into.is_object() || !from.is_object()) return;
  for (auto it = from.begin(); it != from.end(); ++it) {
    const auto found = into.find(it.key());
    if (found == into.end()) {
      into[it.key()] = it.value();
    } else {
      MergeInto(*found, it.value());
    }
  }
}

}  // namespace

namespace watched {
kube::ResourceRef NodeValidations() { return kube::resources::NodeValidations(); }
kube::ResourceRef NcclPolicies() { return kube::resources::NcclPolicies(); }
kube::ResourceRef ForKind(core::WorkloadKind kind) {
  const core::KindInfo& info = core::KindInfoOf(kind);
  const std::string api_version(info.api_version);
  const auto slash = api_version.find('/');
  return {api_version.substr(0, slash),
          api_version.substr(slash + 1),
          std::string(info.resource),
          !info.cluster_scoped,
          "",
          ""};
}
}  // namespace watched

kube::Projection UnionOf(std::vector<kube::Projection> projections) {
  if (projections.empty()) return nullptr;
  for (const kube::Projection& projection : projections) {
    if (!projection) return nullptr;  // someone keeps the whole object
  }
  if (projections.size() == 1) return std::move(projections.front());
  return [projections = std::move(projections)](const Json& object) {
    Json out = projections.front()(object);
    for (std::size_t i = 1; i < projections.size(); ++i) MergeInto(out, projections[i](object));
    return out;
  };
}

kube::ObjectFilter EitherOf(std::vector<kube::ObjectFilter> filters) {
  if (filters.empty()) return nullptr;
  for (const kube::ObjectFilter& filter : filters) {
    if (!filter) return nullptr;  // someone keeps every object
  }
  if (filters.size() == 1) return std::move(filters.front());
  return [filters = std::move(filters)](const Json& object) {
    return std::any_of(filters.begin(), filters.end(),
                       [&object](const kube::ObjectFilter& keep) { return keep(object); });
  };
}

std::vector<Reads> ManagerReads() {
  return {
      // One small object: kept whole.
      {watched::NcclPolicies(), nullptr, {}},
      {kube::resources::Nodes(),
       NodeProjection(),
       {{kNodesByInstanceType, kube::IndexByLabel(std::string(core::kInstanceTypeLabel))}}},
      {watched::NodeValidations(), NodeValidationProjection(), {}},
  };
}

std::vector<Reads> ReadsOf(const ManagerOptions* options) {
  std::vector<Reads> reads = ManagerReads();
  for (const ControllerModule* module : ControllerModules()) {
    if (options != nullptr && !ModuleEnabled(*module, *options)) continue;
    reads.insert(reads.end(), module->reads.begin(), module->reads.end());
  }
  return reads;
}

kube::Projection CachedFields(const kube::ResourceRef& resource) {
  std::vector<kube::Projection> projections;
  for (const Reads& read : ReadsOf(nullptr)) {
    if (Key(read.resource) == Key(resource)) projections.push_back(read.fields);
  }
  if (projections.empty()) throw std::out_of_range("no controller reads " + resource.resource);
  return UnionOf(std::move(projections));
}

Caches::Caches(std::shared_ptr<kube::Client> client)
    : Caches(std::move(client), ReadsOf(nullptr)) {}

Caches::Caches(std::shared_ptr<kube::Client> client, std::span<const Reads> reads) {
  struct Merged {
    kube::ResourceRef resource;
    std::vector<kube::Projection> projections;
    std::map<std::string, kube::IndexFunction> indexes;  // the first of one name
    std::vector<kube::ObjectFilter> filters;
  };
  std::map<std::string, Merged> merged;
  for (const Reads& read : reads) {
    Merged& entry = merged[Key(read.resource)];
    entry.resource = read.resource;
    entry.projections.push_back(read.fields);
    entry.filters.push_back(read.keep);
    for (const auto& [name, index] : read.indexes) entry.indexes.try_emplace(name, index);
  }
  for (auto& [key, entry] : merged) {
    kube::InformerOptions options;
    options.resource = entry.resource;
    options.projection = UnionOf(std::move(entry.projections));
    options.keep = EitherOf(std::move(entry.filters));
    auto informer = std::make_unique<kube::Informer>(client, std::move(options));
    for (auto& [name, index] : entry.indexes) informer->AddIndex(name, std::move(index));
    informers_.emplace(key, std::move(informer));
  }
  // Before any other handler: a reconcile woken by a node's change counts with it.
  const auto nodes = informers_.find(Key(kube::resources::Nodes()));
  const auto validations = informers_.find(Key(watched::NodeValidations()));
  if (nodes != informers_.end() && validations != informers_.end()) {
    supply_->Watch(*nodes->second, *validations->second);
  }
}

kube::Informer& Caches::Get(const kube::ResourceRef& resource) const {
  const auto found = informers_.find(Key(resource));
  if (found == informers_.end()) {
    throw std::out_of_range("no controller reads " + resource.resource + " (" +
                            resource.ApiVersion() + ")");
  }
  return *found->second;
}

kube::Informer& Caches::pods() const { return Get(kube::resources::Pods()); }
kube::Informer& Caches::services() const { return Get(kube::resources::Services()); }
kube::Informer& Caches::nodes() const { return Get(kube::resources::Nodes()); }
kube::Informer& Caches::node_validations() const { return Get(watched::NodeValidations()); }
kube::Informer& Caches::namespaces() const { return Get(kube::resources::Namespaces()); }
kube::Informer& Caches::events() const { return Get(kube::resources::Events()); }
kube::Informer& Caches::policies() const { return Get(watched::NcclPolicies()); }

std::vector<kube::Informer*> Caches::All() const {
  std::vector<kube::Informer*> all;
  for (const auto& [key, informer] : informers_) all.push_back(informer.get());
  return all;
}

void Caches::Start() {
  for (kube::Informer* informer : All()) informer->Start();
}

void Caches::Stop() {
  for (kube::Informer* informer : All()) informer->Stop();
}

std::size_t Caches::CachedObjects() const {
  std::size_t total = 0;
  for (const kube::Informer* informer : All()) total += informer->size();
  return total;
}

std::optional<Json> CacheView::Job(const controllers::JobKey& key) const {
  return Copy(caches_.Job(key.kind).Get(kube::ObjectKey(key.namespace_, key.name)));
}

std::vector<Json> CacheView::PodsWithLabel(std::string_view namespace_, std::string_view label_key,
                                           std::string_view label_value) const {
  std::vector<Json> pods;
  const std::string value =
      std::string(namespace_) + "/" + std::string(label_key) + "=" + std::string(label_value);
  for (const auto& pod : caches_.pods().ByIndex(kPodsByJobIndex, value)) pods.push_back(*pod);
  return pods;
}

std::optional<Json> CacheView::Service(std::string_view namespace_, std::string_view name) const {
  return Copy(caches_.services().Get(kube::ObjectKey(std::string(namespace_), std::string(name))));
}

std::vector<Json> CacheView::NodesWithLabel(std::string_view label_key,
                                            std::string_view label_value) const {
  std::vector<Json> nodes;
  if (label_key == core::kInstanceTypeLabel) {
    for (const auto& node :
         caches_.nodes().ByIndex(kNodesByInstanceType, std::string(label_value))) {
      nodes.push_back(*node);
    }
    return nodes;
  }
  for (const auto& node : caches_.nodes().List()) {
    if (controllers::Label(*node, label_key) == std::string(label_value)) nodes.push_back(*node);
  }
  return nodes;
}

std::optional<Json> CacheView::Node(std::string_view name) const {
  return Copy(caches_.nodes().Get(std::string(name)));
}

std::optional<Json> CacheView::NodeValidation(std::string_view node_name) const {
  return Copy(caches_.node_validations().Get(std::string(node_name)));
}

std::optional<Json> CacheView::Namespace(std::string_view name) const {
  return Copy(caches_.namespaces().Get(std::string(name)));
}

std::optional<Json> RuntimeIn(const Caches& caches, const core::RuntimeRef& ref,
                              std::string_view namespace_) {
  const kube::ResourceRef resource = watched::ForKind(ref.kind);
  kube::Informer* informer = nullptr;
  try {
    informer = &caches.Get(resource);
  } catch (const std::out_of_range&) {
    return std::nullopt;  // no enabled controller reads runtimes
  }
  return Copy(resource.namespaced
                  ? informer->Get(kube::ObjectKey(std::string(namespace_), ref.name))
                  : informer->Get(ref.name));
}

std::optional<Json> CacheView::Runtime(const core::RuntimeRef& ref,
                                       std::string_view namespace_) const {
  return RuntimeIn(caches_, ref, namespace_);
}

namespace {

// The labels of namespace `name` in the caches; null when not known.
const Json* NamespaceLabels(const kube::CachedObject& ns) {
  if (ns == nullptr) return nullptr;
  const Json* metadata = core::Member(*ns, "metadata");
  return metadata == nullptr ? nullptr : core::Member(*metadata, "labels");
}

}  // namespace

bool GateWouldRelease(const Caches& caches, const Json& job, const core::Policy& policy,
                      const core::RuntimeLookup& runtimes) {
  if (!caches.supply().watching() || !caches.nodes().HasSynced() ||
      !caches.node_validations().HasSynced()) {
    return false;
  }
  try {
    std::vector<controllers::NodeDemand> demands = controllers::NodeDemands(job, policy, runtimes);
    const kube::CachedObject ns = caches.namespaces().Get(controllers::Meta(job, "namespace"));
    if (core::PlacementModeIn(policy.placement, NamespaceLabels(ns)) ==
        core::PlacementMode::Required) {
      for (controllers::NodeDemand& demand : demands) demand.one_block = true;
    }
    // Not owned: the view lives only for this call.
    const CacheView view(caches, std::shared_ptr<const core::Policy>(
                                     std::shared_ptr<const core::Policy>(), &policy));
    return controllers::EvaluateGate(demands, view, policy).release;
  } catch (const std::exception&) {  // InputError, a JSON type error: held, and said why
    return false;
  }
}

std::optional<core::JobImagePins> ImagePinsIn(const Caches& caches, const Json& pod,
                                              std::string_view namespace_,
                                              core::PinMode policy_mode) {
  try {
    const kube::CachedObject ns = caches.namespaces().Get(std::string(namespace_));
    const core::PinMode mode = core::PinModeIn(policy_mode, NamespaceLabels(ns));
    if (mode == core::PinMode::Off) return std::nullopt;
    // Every kind whose operator labels its pods so: a TrainJob's pods carry its JobSet's label.
    // A job without a record yet: its pins are none (the webhook may resolve its tags).
    std::optional<core::JobImagePins> found;
    for (const core::KindInfo& info : core::ManagedKinds()) {
      const auto name = controllers::Label(pod, info.pod_job_label);
      if (!name || name->empty()) continue;
      kube::CachedObject job;
      try {
        job = caches.Job(info.kind).Get(kube::ObjectKey(std::string(namespace_), *name));
      } catch (const std::out_of_range&) {
        continue;  // a kind no enabled controller watches
      }
      if (job == nullptr) continue;
      const auto annotation = controllers::Annotation(*job, core::kImageDigestsAnnotation);
      if (!annotation) {
        if (!found) found = core::JobImagePins{mode, std::string(info.kind_name) + " " + *name, {}};
        continue;
      }
      try {
        return core::JobImagePins{mode, std::string(info.kind_name) + " " + *name,
                                  core::ReadImagePins(*annotation)};
      } catch (const core::InputError& e) {
        log::Warn(
            "image digests of a job unreadable; its pods are not pinned",
            {{"job", std::string(info.kind_name) + " " + std::string(namespace_) + "/" + *name},
             {"error", e.what()}});
        return std::nullopt;
      }
    }
    return found;
  } catch (const std::exception& e) {
    log::Warn("image pin lookup failed; the pod is not pinned", {{"error", e.what()}});
  }
  return std::nullopt;
}

std::optional<core::PlacementRequest> PlacementIn(const Caches& caches, const Json& object,
                                                  const core::Workload& workload,
                                                  std::string_view namespace_,
                                                  core::PlacementMode policy_mode) {
  try {
    const kube::CachedObject ns = caches.namespaces().Get(std::string(namespace_));
    const core::PlacementMode mode = core::PlacementModeIn(policy_mode, NamespaceLabels(ns));
    if (mode == core::PlacementMode::Off) return std::nullopt;
    core::PlacementRequest request;
    request.mode = mode;
    if (workload.kind != core::WorkloadKind::Pod) {
      request.queued_by_kueue = core::QueuedByKueue(object);
      if (request.queued_by_kueue) {
        const std::string queue(core::LabelValue(object, core::kKueueQueueNameLabel));
        request.kueue_levels =
            KueueTopologyLevels(caches, namespace_, queue).value_or(std::vector<std::string>{});
      }
      return request;
    }
    // A Pod: its job, by the label its kind's operator puts on every pod of the job.
    const core::RuntimeLookup runtimes = [&caches](const core::RuntimeRef& ref,
                                                   std::string_view runtime_namespace) {
      return RuntimeIn(caches, ref, runtime_namespace);
    };
    for (const core::KindInfo& info : core::ManagedKinds()) {
      const std::string_view name = core::LabelValue(object, info.pod_job_label);
      if (name.empty()) continue;
      kube::CachedObject job;
      try {
        job =
            caches.Job(info.kind).Get(kube::ObjectKey(std::string(namespace_), std::string(name)));
      } catch (const std::out_of_range&) {
        continue;  // a kind no enabled controller watches
      }
      if (job == nullptr) continue;
      request.queued_by_kueue = core::QueuedByKueue(*job);
      request.job_label = std::string(info.pod_job_label);
      request.job_name = std::string(name);
      request.job = std::string(info.kind_name) + " " + request.job_name;
      if (const auto parsed = core::ParseWorkload(*job, runtimes)) {
        request.job_pods = core::RankPods(*parsed);
      }
      return request;
    }
  } catch (const std::exception& e) {
    log::Warn("placement lookup failed; nothing is asked for", {{"error", e.what()}});
  }
  return std::nullopt;
}

std::optional<core::PlacementRequest> WebhookSource::FindPlacement(
    const Json& object, const core::Workload& workload, std::string_view namespace_,
    core::PlacementMode policy_mode) const {
  std::shared_lock lock(mutex_);
  if (caches_ == nullptr) return std::nullopt;
  return PlacementIn(*caches_, object, workload, namespace_, policy_mode);
}

core::PlacementLookup WebhookSource::Placement(std::shared_ptr<const WebhookSource> source) {
  return [source = std::move(source)](const Json& object, const core::Workload& workload,
                                      std::string_view ns, core::PlacementMode mode) {
    return source->FindPlacement(object, workload, ns, mode);
  };
}

std::optional<core::JobImagePins> WebhookSource::FindImagePins(const Json& pod,
                                                               std::string_view namespace_,
                                                               core::PinMode policy_mode) const {
  std::shared_lock lock(mutex_);
  if (caches_ == nullptr) return std::nullopt;
  return ImagePinsIn(*caches_, pod, namespace_, policy_mode);
}

core::ImagePinLookup WebhookSource::ImagePins(std::shared_ptr<const WebhookSource> source) {
  return [source = std::move(source)](const Json& pod, std::string_view ns, core::PinMode mode) {
    return source->FindImagePins(pod, ns, mode);
  };
}

std::optional<Json> WebhookSource::FindRuntime(const core::RuntimeRef& ref,
                                               std::string_view namespace_) const {
  std::shared_lock lock(mutex_);
  if (caches_ == nullptr) return std::nullopt;
  return RuntimeIn(*caches_, ref, namespace_);
}

bool WebhookSource::GateWouldRelease(const Json& job, const core::Policy& policy,
                                     const core::RuntimeLookup& runtimes) const {
  std::shared_lock lock(mutex_);
  return caches_ != nullptr && manager::GateWouldRelease(*caches_, job, policy, runtimes);
}

void WebhookSource::Detach() {
  std::unique_lock lock(mutex_);
  caches_ = nullptr;
}

core::RuntimeLookup WebhookSource::Runtimes(std::shared_ptr<const WebhookSource> source) {
  return [source = std::move(source)](const core::RuntimeRef& ref, std::string_view ns) {
    return source->FindRuntime(ref, ns);
  };
}

core::GateLookup WebhookSource::Gate(std::shared_ptr<const WebhookSource> source) {
  return [source = std::move(source)](const Json& job, const core::Policy& policy,
                                      const core::RuntimeLookup& runtimes) {
    return source->GateWouldRelease(job, policy, runtimes);
  };
}

std::vector<Json> CacheView::EventsAbout(std::string_view namespace_, std::string_view kind,
                                         std::string_view name) const {
  std::vector<Json> events;
  const std::string value =
      std::string(namespace_) + "/" + std::string(kind) + "/" + std::string(name);
  for (const auto& event : caches_.events().ByIndex(kEventsByRegarding, value)) {
    events.push_back(*event);
  }
  return events;
}

}  // namespace ncclguard::manager
