// The gate's count of validated nodes per instance type, kept up to date from the node and
// NodeValidation informers' changes. A held job's reconcile, the Kueue check and the webhook's
// admission (the gate's fast path) count a type from it without reading a cached object, in time
// proportional to the nodes of that type; a change says which instance type it touched, so only
// the jobs waiting for that type are woken (manager/wiring.cpp).
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>

#include "controllers/node_supply.h"
#include "core/policy.h"
#include "kube/informer.h"

namespace ncclguard::manager {

class NodeSupplyIndex {
 public:
  // Adds its handlers: before the informers start, and before any controller's handlers, so
  // that a reconcile woken by a change counts with it.
  void Watch(kube::Informer& nodes, kube::Informer& validations);

  // What controllers::CountNodes would count over the same nodes and NodeValidations.
  controllers::NodeSupply Count(const controllers::NodeDemand& demand,
                                const core::Policy& policy) const;
  // The instance-type label of the node of this name; "" when the node is not known.
  std::string InstanceTypeOf(std::string_view node) const;
  std::size_t size() const;
  // Whether Watch was called (caches that read no nodes keep no index).
  bool watching() const { return watching_; }

  // What a handler does (public for tests that drive the index without informers).
  void NodeChanged(const core::Json* node, std::string_view name);  // null: deleted
  void ValidationChanged(const core::Json* validation, std::string_view name);

 private:
  struct Entry {
    std::string instance_type;  // "" without a Node (a NodeValidation alone)
    bool has_node = false;
    bool has_validation = false;
    controllers::NodeFacts facts;
  };
  void SetTypeLocked(const std::string& name, Entry& entry, const std::string& type);
  void DropIfEmptyLocked(const std::string& name);

  bool watching_ = false;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;
  // Node names by instance type, in name order (the gate's message names the first failed node).
  std::map<std::string, std::set<std::string>, std::less<>> by_type_;
};

}  // namespace ncclguard::manager
