#include "manager/cache.h"

#include <chrono>

#include "controllers/labels.h"
#include "manager/projections.h"

namespace ncclguard::manager {
namespace {

using core::Json;

constexpr std::string_view kInstanceTypeLabel = "node.kubernetes.io/instance-type";

std::string MetaString(const Json& object, const char* field) {
  return controllers::Meta(object, field);
}

std::optional<Json> Copy(const kube::CachedObject& object) {
  if (!object) return std::nullopt;
  return *object;
}

kube::IndexFunction PodsByJob() {
  return [](const Json& pod) {
    std::vector<std::string> values;
    const std::string ns = MetaString(pod, "namespace");
    for (const core::KindInfo& info : core::ManagedKinds()) {
      if (auto value = controllers::Label(pod, info.pod_job_label)) {
        std::string entry = ns + "/" + std::string(info.pod_job_label) + "=" + *value;
        if (std::find(values.begin(), values.end(), entry) == values.end()) {
          values.push_back(std::move(entry));
        }
      }
    }
    return values;
  };
}

kube::IndexFunction EventsByRegarding() {
  return [](const Json& event) -> std::vector<std::string> {
    const auto regarding = event.find("regarding");
    if (regarding == event.end() || !regarding->is_object()) return {};
    return {MetaString(event, "namespace") + "/" + regarding->value("kind", "") + "/" +
            regarding->value("name", "")};
  };
}

std::unique_ptr<kube::Informer> Make(const std::shared_ptr<kube::Client>& client,
                                     kube::ResourceRef resource, kube::Projection projection) {
  kube::InformerOptions options;
  options.resource = std::move(resource);
  options.projection = std::move(projection);
  return std::make_unique<kube::Informer>(client, std::move(options));
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
          true,
          "",
          ""};
}
}  // namespace watched

Caches::Caches(std::shared_ptr<kube::Client> client) {
  for (const core::KindInfo& info : core::ManagedKinds()) {
    jobs_[info.kind] = Make(client, watched::ForKind(info.kind), JobProjection(info.kind));
  }
  pods_ = Make(client, kube::resources::Pods(), PodProjection());
  pods_->AddIndex(kPodsByJobIndex, PodsByJob());
  services_ = Make(client, kube::resources::Services(), ServiceProjection());
  nodes_ = Make(client, kube::resources::Nodes(), NodeProjection());
  nodes_->AddIndex(kNodesByInstanceType, kube::IndexByLabel(std::string(kInstanceTypeLabel)));
  node_validations_ = Make(client, watched::NodeValidations(), NodeValidationProjection());
  namespaces_ = Make(client, kube::resources::Namespaces(), NamespaceProjection());
  events_ = Make(client, kube::resources::Events(), EventProjection());
  events_->AddIndex(kEventsByRegarding, EventsByRegarding());
  policies_ = Make(client, watched::NcclPolicies(), nullptr);  // one small object: kept whole
}

std::vector<kube::Informer*> Caches::All() const {
  std::vector<kube::Informer*> all;
  for (const auto& [kind, informer] : jobs_) all.push_back(informer.get());
  for (const auto* informer :
       {&pods_, &services_, &nodes_, &node_validations_, &namespaces_, &events_, &policies_}) {
    all.push_back(informer->get());
  }
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
  if (label_key == kInstanceTypeLabel) {
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

std::optional<Json> CacheView::NodeValidation(std::string_view node_name) const {
  return Copy(caches_.node_validations().Get(std::string(node_name)));
}

std::optional<Json> CacheView::Namespace(std::string_view name) const {
  return Copy(caches_.namespaces().Get(std::string(name)));
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
