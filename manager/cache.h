// The informers the controllers watch (one per kind, shared) and a ClusterView over their caches.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "controllers/cluster_view.h"
#include "controllers/job_kind.h"
#include "core/gate.h"
#include "core/placement_request.h"
#include "core/policy.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "manager/controller_module.h"
#include "manager/node_supply_index.h"
#include "manager/pod_log_reader.h"

namespace ncclguard::manager {

// The resources the built-in controllers read.
namespace watched {
kube::ResourceRef NodeValidations();  // ncclguard.io/v1alpha1, cluster-scoped
kube::ResourceRef NcclPolicies();     // ncclguard.io/v1alpha1, cluster-scoped
kube::ResourceRef ForKind(core::WorkloadKind kind);
}  // namespace watched

// One informer per resource the controllers read (their ControllerModule::reads, and the
// manager's own NcclPolicy), keeping the union of the fields each of them keeps, with the
// indexes they asked for. Informers are shared: a resource read by two controllers is listed and
// watched once.
class Caches {
 public:
  Caches(std::shared_ptr<kube::Client> client, std::span<const Reads> reads);
  // ReadsOf every registered controller (for tests).
  explicit Caches(std::shared_ptr<kube::Client> client);

  // The informer of a resource some controller reads; throws std::out_of_range otherwise.
  kube::Informer& Get(const kube::ResourceRef& resource) const;
  kube::Informer& Job(core::WorkloadKind kind) const { return Get(watched::ForKind(kind)); }
  kube::Informer& pods() const;
  kube::Informer& services() const;
  kube::Informer& nodes() const;
  kube::Informer& node_validations() const;
  kube::Informer& namespaces() const;
  kube::Informer& events() const;
  kube::Informer& policies() const;

  // The gate's count of validated nodes per instance type, kept from the node and
  // NodeValidation informers (whose handlers it adds first).
  const NodeSupplyIndex& supply() const { return *supply_; }

  std::vector<kube::Informer*> All() const;
  void Start();
  void Stop();
  std::size_t CachedObjects() const;

 private:
  // By ResourceRef::CollectionPath().
  std::map<std::string, std::unique_ptr<kube::Informer>> informers_;
  std::unique_ptr<NodeSupplyIndex> supply_ = std::make_unique<NodeSupplyIndex>();
};

// What the manager itself reads, for every controller: the NcclPolicy (PolicySource) and what
// CacheView answers the gate's questions from (Nodes by instance type, NodeValidations).
std::vector<Reads> ManagerReads();
// The manager's reads and those of the controllers `options` enable (null: every registered one).
std::vector<Reads> ReadsOf(const ManagerOptions* options);
// What the caches keep of `resource` when every controller reading it runs: the union of their
// fields (null: whole objects). Throws std::out_of_range when no controller reads it.
kube::Projection CachedFields(const kube::ResourceRef& resource);
// The fields two projections keep together: objects merged key by key, arrays of objects of one
// length entry by entry (two controllers keeping different fields of each container), the first
// one's value where both keep anything else. Null (whole objects) wins.
kube::Projection UnionOf(std::vector<kube::Projection> projections);

// The index names the view uses.
inline constexpr const char* kPodsByJobIndex = "job";            // "<ns>/<label>=<value>"
inline constexpr const char* kNodesByInstanceType = "instance";  // instance-type label value
inline constexpr const char* kEventsByRegarding = "regarding";   // "<ns>/<kind>/<name>"

// A Kubeflow Trainer runtime in the caches (nullopt when absent or not read).
std::optional<core::Json> RuntimeIn(const Caches& caches, const core::RuntimeRef& ref,
                                    std::string_view namespace_);

// Whether the gate would release `job` now, from the caches (the gate's fast path, core/gate.h):
// its demands met by the NodeSupplyIndex's count, as EvaluateGate would judge. False until the
// nodes and NodeValidations have synced, and for a spec the gate cannot read (the controller
// says why when it releases it).
bool GateWouldRelease(const Caches& caches, const core::Json& job, const core::Policy& policy,
                      const core::RuntimeLookup& runtimes);

// The image digests recorded for the job of `pod` (created in `namespace_`), in the mode in force
// there (core/image_pin.h ImagePinLookup); an unreadable record is logged and pins nothing.
std::optional<core::JobImagePins> ImagePinsIn(const Caches& caches, const core::Json& pod,
                                              std::string_view namespace_,
                                              core::PinMode policy_mode);

// Where the pods of `object` (a managed job, or a Pod of one, created in `namespace_`) are asked
// to go, in the mode in force there (core/placement_request.h PlacementLookup): whether Kueue
// queues the job and the levels of its queue's Topology (manager/kueue_topology.h), or the pod's
// job, its pod label and size. nullopt in mode off, and for a Pod of no job the caches know.
std::optional<core::PlacementRequest> PlacementIn(const Caches& caches, const core::Json& object,
                                                  const core::Workload& workload,
                                                  std::string_view namespace_,
                                                  core::PlacementMode policy_mode);

// What the in-process webhook reads of the caches, which it may outlive: Trainer's runtimes,
// the gate's count, the jobs' recorded image digests and where their pods are asked to go. Each
// call holds a lock that Detach, called before the caches go, waits for; after it, nothing is found
// and nothing is released at once.
class WebhookSource {
 public:
  explicit WebhookSource(const Caches& caches) : caches_(&caches) {}
  std::optional<core::Json> FindRuntime(const core::RuntimeRef& ref,
                                        std::string_view namespace_) const;
  bool GateWouldRelease(const core::Json& job, const core::Policy& policy,
                        const core::RuntimeLookup& runtimes) const;
  std::optional<core::JobImagePins> FindImagePins(const core::Json& pod,
                                                  std::string_view namespace_,
                                                  core::PinMode policy_mode) const;
  std::optional<core::PlacementRequest> FindPlacement(const core::Json& object,
                                                      const core::Workload& workload,
                                                      std::string_view namespace_,
                                                      core::PlacementMode policy_mode) const;
  void Detach();
  static core::RuntimeLookup Runtimes(std::shared_ptr<const WebhookSource> source);
  static core::ImagePinLookup ImagePins(std::shared_ptr<const WebhookSource> source);
  static core::PlacementLookup Placement(std::shared_ptr<const WebhookSource> source);
  static core::GateLookup Gate(std::shared_ptr<const WebhookSource> source);

 private:
  mutable std::shared_mutex mutex_;
  const Caches* caches_;
};

// What one reconcile reads: the caches and the policy in force when it started.
class CacheView : public controllers::ClusterView {
 public:
  CacheView(const Caches& caches, std::shared_ptr<const core::Policy> policy,
            const PodLogStore* pod_logs = nullptr)
      : caches_(caches), policy_(std::move(policy)), pod_logs_(pod_logs) {}

  std::optional<core::Json> Job(const controllers::JobKey& key) const override;
  std::vector<core::Json> PodsWithLabel(std::string_view namespace_, std::string_view label_key,
                                        std::string_view label_value) const override;
  std::optional<core::Json> Service(std::string_view namespace_,
                                    std::string_view name) const override;
  std::vector<core::Json> NodesWithLabel(std::string_view label_key,
                                         std::string_view label_value) const override;
  std::optional<core::Json> Node(std::string_view name) const override;
  std::optional<core::Json> NodeValidation(std::string_view node_name) const override;
  std::optional<core::Json> Namespace(std::string_view name) const override;
  std::optional<core::Json> Runtime(const core::RuntimeRef& ref,
                                    std::string_view namespace_) const override;
  std::vector<core::Json> EventsAbout(std::string_view namespace_, std::string_view kind,
                                      std::string_view name) const override;
  std::optional<controllers::NodeSupply> IndexedSupply(
      const controllers::NodeDemand& demand) const override {
    if (!caches_.supply().watching()) return std::nullopt;
    return caches_.supply().Count(demand, *policy_);
  }
  const core::Policy& Policy() const override { return *policy_; }
  std::vector<controllers::PodLogDigest> PodLogs(std::string_view namespace_,
                                                 std::string_view pod) const override {
    return pod_logs_ != nullptr ? pod_logs_->Get(namespace_, pod)
                                : std::vector<controllers::PodLogDigest>{};
  }

 private:
  const Caches& caches_;
  std::shared_ptr<const core::Policy> policy_;
  const PodLogStore* pod_logs_;
};

}  // namespace ncclguard::manager
