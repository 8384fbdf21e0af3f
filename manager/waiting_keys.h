// Which queued objects wait for validated nodes of which instance type, as their last reconcile
// said (controllers::ReconcileResult::waiting_for): a node's change wakes the held jobs and
// Pending Workloads waiting for its type, and no others, so a cluster of thousands of nodes and
// jobs pays per change for the objects that change can release.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "controllers/json_fields.h"
#include "controllers/labels.h"
#include "controllers/node_supply.h"
#include "core/pod_spec.h"
#include "manager/cache.h"
#include "manager/controller.h"

namespace ncclguard::manager {

template <typename Key>
class WaitingKeys {
 public:
  // After each reconcile of `key`: the types it waits for now (empty: none, it is forgotten).
  void Record(const Key& key, const std::vector<std::string>& types) {
    const std::string text = key.ToString();
    std::lock_guard lock(mutex_);
    if (const auto old = types_of_.find(text); old != types_of_.end()) {
      for (const std::string& type : old->second) {
        const auto keys = by_type_.find(type);
        if (keys == by_type_.end()) continue;
        keys->second.erase(text);
        if (keys->second.empty()) by_type_.erase(keys);
      }
      types_of_.erase(old);
    }
    if (types.empty()) return;
    std::set<std::string>& recorded = types_of_[text];
    for (const std::string& type : types) {
      recorded.insert(type);
      by_type_[type].insert_or_assign(text, key);
    }
  }

  // The objects waiting for nodes of `type`.
  std::vector<Key> For(const std::string& type) const {
    std::vector<Key> keys;
    std::lock_guard lock(mutex_);
    const auto found = by_type_.find(type);
    if (found == by_type_.end()) return keys;
    for (const auto& [text, key] : found->second) keys.push_back(key);
    return keys;
  }

  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return types_of_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::set<std::string>> types_of_;      // key text -> types
  std::map<std::string, std::map<std::string, Key>> by_type_;  // type -> key text -> key
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
// NodeValidation, changes in a way the gate counts. The caches' NodeSupplyIndex has taken the
// change in by then (its handlers come first) and knows a NodeValidation's node's type.
template <QueueKey Key>
std::vector<Watch<Key>> NodeChangeWatches(const Caches& caches,
                                          std::shared_ptr<const WaitingKeys<Key>> waiting) {
  return std::vector<Watch<Key>>{
      Watch<Key>{&caches.nodes(),
                 [waiting](const core::Json& node) {
                   return waiting->For(
                       controllers::Label(node, core::kInstanceTypeLabel).value_or(""));
                 },
                 GateRelevantNodeChange},
      Watch<Key>{&caches.node_validations(),
                 [waiting, &caches](const core::Json& validation) {
                   return waiting->For(
                       caches.supply().InstanceTypeOf(controllers::Meta(validation, "name")));
                 },
                 GateRelevantValidationChange},
  };
}

}  // namespace ncclguard::manager
