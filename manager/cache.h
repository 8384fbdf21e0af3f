// The informers the controllers watch (one per kind, shared) and a ClusterView over their caches.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "controllers/cluster_view.h"
#include "controllers/job_kind.h"
#include "core/policy.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "manager/pod_log_reader.h"

namespace ncclguard::manager {

// The resources the controller reads (each one informer).
namespace watched {
kube::ResourceRef NodeValidations();  // ncclguard.io/v1alpha1, cluster-scoped
kube::ResourceRef NcclPolicies();     // ncclguard.io/v1alpha1, cluster-scoped
kube::ResourceRef ForKind(core::WorkloadKind kind);
}  // namespace watched

// One informer per watched resource, projected and indexed for the reconcilers' questions.
class Caches {
 public:
  explicit Caches(std::shared_ptr<kube::Client> client);

  kube::Informer& Job(core::WorkloadKind kind) const { return *jobs_.at(kind); }
  kube::Informer& pods() const { return *pods_; }
  kube::Informer& services() const { return *services_; }
  kube::Informer& nodes() const { return *nodes_; }
  kube::Informer& node_validations() const { return *node_validations_; }
  kube::Informer& namespaces() const { return *namespaces_; }
  kube::Informer& events() const { return *events_; }
  kube::Informer& policies() const { return *policies_; }

  std::vector<kube::Informer*> All() const;
  void Start();
  void Stop();
  std::size_t CachedObjects() const;

 private:
  std::map<core::WorkloadKind, std::unique_ptr<kube::Informer>> jobs_;
  std::unique_ptr<kube::Informer> pods_, services_, nodes_, node_validations_, namespaces_, events_,
      policies_;
};

// The index names the view uses.
inline constexpr const char* kPodsByJobIndex = "job";            // "<ns>/<label>=<value>"
inline constexpr const char* kNodesByInstanceType = "instance";  // instance-type label value
inline constexpr const char* kEventsByRegarding = "regarding";   // "<ns>/<kind>/<name>"

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
  std::optional<core::Json> NodeValidation(std::string_view node_name) const override;
  std::optional<core::Json> Namespace(std::string_view name) const override;
  std::vector<core::Json> EventsAbout(std::string_view namespace_, std::string_view kind,
                                      std::string_view name) const override;
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
