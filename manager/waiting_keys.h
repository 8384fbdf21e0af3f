// Which queued objects wait for validated nodes, how many of which instance type, as their last
// reconcile said (controllers::ReconcileResult::waiting_for). A node's change for the better wakes
// only the held jobs and Pending Workloads that its type's count can now release (those needing no
// more nodes than it counts): a repaired rack of thousands of nodes pays per change for the
// objects that change can release, not for every held one, which refresh their held message at
// their own requeue (the gate's backoff). A change for the worse wakes them all.
#pragma once

#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "controllers/json_fields.h"
#include "controllers/labels.h"
#include "controllers/node_supply.h"
#include "core/pod_spec.h"
#include "manager/cache.h"
#include "manager/controller.h"
#include "manager/wiring.h"

namespace ncclguard::manager {

template <typename Key>
class WaitingKeys {
 public:
  // After each reconcile of `key`: what it waits for now (empty: nothing, it is forgotten).
  void Record(const Key& key, const std::vector<controllers::NodeDemand>& demands) {
    const std::string text = key.ToString();
    std::lock_guard lock(mutex_);
    if (const auto old = types_of_.find(text); old != types_of_.end()) {
      for (const std::string& type : old->second) {
        const auto waiting = by_type_.find(type);
        if (waiting == by_type_.end()) continue;
        waiting->second.erase(text);
        if (waiting->second.empty()) by_type_.erase(waiting);
      }
      types_of_.erase(old);
    }
    if (demands.empty()) return;
    std::vector<std::string>& types = types_of_[text];
    for (const controllers::NodeDemand& demand : demands) {
      types.push_back(demand.instance_type);
      by_type_[demand.instance_type].insert_or_assign(text, Waiting{key, demand.nodes});
    }
  }

  // The objects waiting for nodes of `type` that need at most `counted` of them.
  std::vector<Key> Releasable(const std::string& type, std::int64_t counted) const {
    std::vector<Key> keys;
    std::lock_guard lock(mutex_);
    const auto found = by_type_.find(type);
    if (found == by_type_.end()) return keys;
    for (const auto& [text, waiting] : found->second) {
      if (waiting.needed <= counted) keys.push_back(waiting.key);
    }
    return keys;
  }

  // Whether anything waits for nodes of `type` (no count needed otherwise).
  bool AnyWaitingFor(const std::string& type) const {
    std::lock_guard lock(mutex_);
    return by_type_.contains(type);
  }

  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return types_of_.size();
  }

 private:
  struct Waiting {
    Key key;
    std::int64_t needed = 0;
  };
  mutable std::mutex mutex_;
  std::map<std::string, std::vector<std::string>> types_of_;       // key text -> types
  std::map<std::string, std::map<std::string, Waiting>> by_type_;  // type -> key text -> wait
};

// Whether a node's or NodeValidation's change can move the gate's count: added, deleted, or
// changed in what the gate reads of it (controllers::FactsOf) or, for a node, its instance type.
inline bool GateRelevantNodeChange(const Change& change) {
  if (change.old_object == nullptr || change.new_object == nullptr) return true;
  return controllers::FactsOf(change.old_object, nullptr) !=
             controllers::FactsOf(change.new_object, nullptr) ||
         controllers::Label(*change.old_object, core::kInstanceTypeLabel) !=
             controllers::Label(*change.new_object, core::kInstanceTypeLabel);
}
inline bool GateRelevantValidationChange(const Change& change) {
  if (change.old_object == nullptr || change.new_object == nullptr) return true;
  return controllers::FactsOf(nullptr, change.old_object) !=
         controllers::FactsOf(nullptr, change.new_object);
}

// The watches that wake the objects `waiting` records when a node of their instance type, or its
// NodeValidation, changes so that the type counts enough nodes for them. The caches'
// NodeSupplyIndex has taken the change in by then (its handlers come first), so its count is the
// one the woken reconcile will see, and it knows a NodeValidation's node's type.
// Whether a change can only lower the type's count or add a failure (whatever the policy): a
// node deleted, cordoned or marked unhealthy by HyperPod; a NodeValidation deleted, turned Fail
// or no longer Pass/Warn, or failing another check.
inline bool WorseNodeChange(const Change& change) {
  if (change.new_object == nullptr) return true;
  if (change.old_object == nullptr) return false;
  const controllers::NodeFacts before = controllers::FactsOf(change.old_object, nullptr);
  const controllers::NodeFacts after = controllers::FactsOf(change.new_object, nullptr);
  return (!before.cordoned && after.cordoned) ||
         (!before.hyperpod_node_health && after.hyperpod_node_health) ||
         (!before.hyperpod_deep_health && after.hyperpod_deep_health);
}
inline bool WorseValidationChange(const Change& change) {
  if (change.new_object == nullptr) return true;
  if (change.old_object == nullptr) return false;
  const controllers::NodeFacts before = controllers::FactsOf(nullptr, change.old_object);
  const controllers::NodeFacts after = controllers::FactsOf(nullptr, change.new_object);
  const auto passed = [](const std::string& summary) {
    return summary == "Pass" || summary == "Warn";
  };
  return (after.summary == "Fail" && before != after) ||
         (passed(before.summary) && !passed(after.summary));
}

// The watches that wake the objects `waiting` records when a node of their instance type, or its
// NodeValidation, changes: a change for the better wakes those the type now counts enough nodes
// for; a change for the worse wakes every one waiting for the type, so that their message names
// it at once. The caches' NodeSupplyIndex has taken the change in by then (its handlers come
// first), so its count is the one the woken reconcile will see, and it knows a NodeValidation's
// node's type. The objects a change for the better wakes are queued urgent: a release goes ahead
// of the reconciles that the released jobs' pods queue.
template <QueueKey Key>
std::vector<Watch<Key>> NodeChangeWatches(const Caches& caches, const PolicySource& policy,
                                          std::shared_ptr<const WaitingKeys<Key>> waiting) {
  const auto releasable = [waiting, &caches, &policy](const std::string& type) {
    if (type.empty() || !waiting->AnyWaitingFor(type)) return std::vector<Key>{};
    const std::int64_t counted = caches.supply().Count({type, 0}, *policy.Current()).counted;
    return waiting->Releasable(type, counted);
  };
  const auto everyone = [waiting](const std::string& type) {
    return waiting->Releasable(type, std::numeric_limits<std::int64_t>::max());
  };
  const auto node_type = [](const core::Json& node) {
    return controllers::Label(node, core::kInstanceTypeLabel).value_or("");
  };
  const auto validation_type = [&caches](const core::Json& validation) {
    return caches.supply().InstanceTypeOf(controllers::Meta(validation, "name"));
  };
  return std::vector<Watch<Key>>{
      Watch<Key>{
          &caches.nodes(),
          [releasable, node_type](const core::Json& node) { return releasable(node_type(node)); },
          [](const Change& change) {
            return GateRelevantNodeChange(change) && !WorseNodeChange(change);
          },
          true},
      Watch<Key>{
          &caches.nodes(),
          [everyone, node_type](const core::Json& node) { return everyone(node_type(node)); },
          WorseNodeChange},
      Watch<Key>{&caches.node_validations(),
                 [releasable, validation_type](const core::Json& validation) {
                   return releasable(validation_type(validation));
                 },
                 [](const Change& change) {
                   return GateRelevantValidationChange(change) && !WorseValidationChange(change);
                 },
                 true},
      Watch<Key>{&caches.node_validations(),
                 [everyone, validation_type](const core::Json& validation) {
                   return everyone(validation_type(validation));
                 },
                 WorseValidationChange},
  };
}

}  // namespace ncclguard::manager
