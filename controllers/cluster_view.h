#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "controllers/job_kind.h"
#include "controllers/node_supply.h"
#include "controllers/pod_logs.h"
#include "core/json.h"
#include "core/policy.h"
#include "core/trainjob.h"

namespace ncclguard::controllers {

// What the reconcilers read: the informer caches, behind an interface so that the reconcilers are
// pure and unit tests fake it. Objects come back as copies (a cache may change underneath).
// Absent objects are nullopt / empty; implementations never throw for "not found".
class ClusterView {
 public:
  virtual ~ClusterView() = default;

  virtual std::optional<Json> Job(const JobKey& key) const = 0;
  // Pods in `namespace_` whose label `label_key` equals `label_value`.
  virtual std::vector<Json> PodsWithLabel(std::string_view namespace_, std::string_view label_key,
                                          std::string_view label_value) const = 0;
  virtual std::optional<Json> Service(std::string_view namespace_, std::string_view name) const = 0;
  // Nodes whose label `label_key` equals `label_value` (the gate asks by instance type).
  virtual std::vector<Json> NodesWithLabel(std::string_view label_key,
                                           std::string_view label_value) const = 0;
  // How the nodes of the demand's instance type stand, from an index kept up to date as nodes
  // and NodeValidations change (manager/node_supply_index.h), judged with Policy(); nullopt: no
  // index here, and CountNodes reads every node of the type.
  virtual std::optional<NodeSupply> IndexedSupply(const NodeDemand& /*demand*/) const {
    return std::nullopt;
  }
  // The Node of that name (its labels: its place in the network, core/topology.h); nullopt when
  // it is not known, or a view that does not read nodes by name.
  virtual std::optional<Json> Node(std::string_view /*name*/) const { return std::nullopt; }
  // The cluster-scoped NodeValidation named after the node.
  virtual std::optional<Json> NodeValidation(std::string_view node_name) const = 0;
  virtual std::optional<Json> Namespace(std::string_view name) const = 0;
  // Events (core/v1 or events.k8s.io/v1) about the object `kind`/`name` in `namespace_`.
  virtual std::vector<Json> EventsAbout(std::string_view namespace_, std::string_view kind,
                                        std::string_view name) const = 0;
  // What the controller read of a pod's containers' logs (controllers/pod_logs.h); empty when
  // nothing was read (yet), or logs are not read at all.
  virtual std::vector<PodLogDigest> PodLogs(std::string_view /*namespace_*/,
                                            std::string_view /*pod*/) const {
    return {};
  }
  // A Kubeflow Trainer runtime (core/trainjob.h), a TrainingRuntime in `namespace_`; nullopt when
  // it is not known (Trainer not installed, or a view that does not read runtimes).
  virtual std::optional<Json> Runtime(const core::RuntimeRef& /*ref*/,
                                      std::string_view /*namespace_*/) const {
    return std::nullopt;
  }
  // The policy in force (the last good NcclPolicy, else the defaults).
  virtual const core::Policy& Policy() const = 0;
};

}  // namespace ncclguard::controllers
