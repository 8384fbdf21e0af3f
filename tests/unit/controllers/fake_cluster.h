// An in-memory ClusterView for the reconciler tests, which also applies a reconcile's actions the
// way the API server would (merge patches, resourceVersion conflicts, generated Event names), so
// tests can reconcile, apply, and reconcile again.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "controllers/actions.h"
#include "controllers/cluster_view.h"
#include "controllers/kueue_check.h"
#include "controllers/timestamps.h"

namespace ncclguard::test {

using controllers::JobKey;
using core::Json;

class FakeCluster : public controllers::ClusterView {
 public:
  FakeCluster();

  // Objects; AddJob gives the job a uid and resourceVersion when it has none.
  void AddNamespace(const std::string& name, bool enabled);
  // Sets a label on a namespace AddNamespace made (ncclguard.io/mode, say).
  void LabelNamespace(const std::string& name, const std::string& key, const std::string& value);
  void AddJob(Json job);
  void AddPod(Json pod);
  void AddService(Json service);
  // A node of `instance_type`; `summary` "" = no NodeValidation. `checks` goes to status.checks.
  void AddNode(const std::string& name, const std::string& instance_type,
               const std::string& summary, Json checks = Json::array(), bool cordoned = false);
  void AddEvent(Json event);
  // A Kubeflow Trainer runtime (TrainingRuntime or ClusterTrainingRuntime).
  void AddRuntime(Json runtime) { runtimes_.push_back(std::move(runtime)); }
  core::Policy& policy() { return policy_; }

  // Applies the actions in order, as the executor would (a Conflict ends them); returns how
  // many failed (a Service that exists, a Conflict).
  int Apply(const std::vector<controllers::Action>& actions);
  Json& JobObject(const JobKey& key);
  Json& NodeObject(const std::string& name);
  // The NodeValidation AddNode made (a summary given).
  Json& ValidationObject(const std::string& node) { return validations_.at(node); }
  Json& PodObject(const std::string& ns, const std::string& name);
  const std::vector<Json>& events() const { return events_; }
  std::size_t ServiceCount() const { return services_.size(); }

  std::optional<Json> Job(const JobKey& key) const override;
  std::vector<Json> PodsWithLabel(std::string_view ns, std::string_view key,
                                  std::string_view value) const override;
  std::optional<Json> Service(std::string_view ns, std::string_view name) const override;
  std::vector<Json> NodesWithLabel(std::string_view key, std::string_view value) const override;
  std::optional<Json> Node(std::string_view name) const override;
  std::optional<Json> NodeValidation(std::string_view node) const override;
  std::optional<Json> Namespace(std::string_view name) const override;
  std::vector<Json> EventsAbout(std::string_view ns, std::string_view kind,
                                std::string_view name) const override;
  std::optional<Json> Runtime(const core::RuntimeRef& ref, std::string_view ns) const override;
  const core::Policy& Policy() const override { return policy_; }

 private:
  // The object's new resourceVersion ("" for a Service); nullopt: Conflict or no such object.
  std::optional<std::string> ApplyPatch(const controllers::MergePatch& patch);

  std::map<std::string, Json> jobs_;  // by JobKey::ToString()
  std::map<std::string, Json> namespaces_;
  std::vector<Json> pods_;
  std::map<std::string, Json> services_;  // ns/name
  std::vector<Json> nodes_;
  std::map<std::string, Json> validations_;
  std::vector<Json> events_;
  std::vector<Json> runtimes_;
  core::Policy policy_;
  int next_version_ = 100;
};

// Builders for tests.
// A PyTorchJob on p5.48xlarge: one Master and `workers` Workers, 8 GPUs each.
// A NodeValidation's status.checks with one failed check: 30 of 32 EFA devices.
Json EfaFailure();

Json P5PyTorchJob(const std::string& ns, const std::string& name, int workers,
                  bool gate_pending = true);
// A pod of a Kubeflow job, with `status` as given.
Json KubeflowPod(const std::string& ns, const std::string& job, const std::string& name,
                 Json status, const std::string& node = "");
// A terminated container status.
Json Terminated(const std::string& container, int exit_code, const std::string& reason,
                const std::string& message = "");
// A Kueue Workload in `ns` with quota reserved at `reserved` for `pods` 8-GPU pods (pod set
// "worker", flavor "p5"), our check "preflight" Pending.
Json QueuedP5Workload(const std::string& ns, int pods, controllers::Timestamp reserved);
// The Kueue objects the preflight check reads: our check "preflight" and the ResourceFlavor "p5"
// of p5.48xlarge nodes.
controllers::KueueObjects P5KueueObjects();

}  // namespace ncclguard::test
