#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "controllers/node_supply.h"

#include "core/json.h"
#include "core/object_ref.h"

namespace ncclguard::controllers {

using core::Json;

// The object an action targets; its `resource` (the REST plural) must be set.
using core::ObjectRef;

// POST `object` to its collection. AlreadyExists means another writer won; requeue.
struct CreateObject {
  ObjectRef target;  // where it goes (name = the new object's name)
  Json object;
};

// A JSON merge patch (application/merge-patch+json), on the object or its status subresource.
// A patch that carries metadata.resourceVersion fails with Conflict when the object changed
// since the controller read it; the executor then requeues and the reconciler reads again.
// Several patches of one object in one reconcile all name the version read: the writes between
// them are the reconcile's own, so each is sent with the version the one before it made
// (PatchVersions).
struct MergePatch {
  ObjectRef target;
  bool status_subresource = false;
  Json patch;
};

// The versions one reconcile's patches have made of each object, for whoever applies them (the
// executor, the tests' fake cluster).
class PatchVersions {
 public:
  // `patch` as it is to be sent: the version it names, when an earlier patch of this reconcile
  // named the same one, becomes the version that patch made.
  Json Resolve(const MergePatch& patch) const;
  // `patch` (as the reconcile computed it) was applied; the object is now at `version`.
  void Wrote(const MergePatch& patch, std::string version);

 private:
  std::map<std::string, std::pair<std::string, std::string>> made_;  // object: (read, made)
};

// An events.k8s.io/v1 Event about `regarding`.
struct RecordEvent {
  ObjectRef regarding;
  std::string type;    // Normal | Warning
  std::string reason;  // UpperCamelCase (core/reason.h)
  std::string action;  // what the controller did or saw: Gate, Release, Diagnose, Rendezvous
  std::string note;
  // metadata.annotations of the Event: a diagnosis' id under core::kDiagnosisAnnotation.
  std::map<std::string, std::string, std::less<>> annotations;
};

// Server-side apply (application/apply-patch+yaml) of `object` as `field_manager`, taking over
// the fields it names (force); the fields other managers own and it does not name stay theirs,
// e.g. one entry of a list-map such as a Kueue Workload's status.admissionChecks.
struct ApplyObject {
  ObjectRef target;
  bool status_subresource = false;
  std::string field_manager;
  Json object;
};

using Action = std::variant<CreateObject, MergePatch, RecordEvent, ApplyObject>;

// What one reconcile decided. The executor applies the actions in order and stops at the first
// that fails (and requeues with backoff); the next reconcile reads the state again.
struct ReconcileResult {
  std::vector<Action> actions;
  std::optional<std::chrono::seconds> requeue_after;
  // The validated nodes the object waits for (a held job, a Workload whose check is Pending),
  // per instance type: a node's change wakes it only once its type counts as many as it needs.
  std::vector<NodeDemand> waiting_for;
};

// The REST path of the target ("/apis/kubeflow.org/v1/namespaces/ns/pytorchjobs/name"), or of its
// collection when `collection` is true; `/status` appended for a status patch.
std::string RestPath(const ObjectRef& target, bool collection = false, bool status = false);

// The events.k8s.io/v1 Event body for `event` (eventTime = `now_rfc3339_micro`, name generated
// by the server from generateName).
Json EventObject(const RecordEvent& event, std::string_view reporting_instance,
                 std::string_view now_rfc3339_micro);

}  // namespace ncclguard::controllers
