#include "core/gate.h"

#include <algorithm>

#include "core/errors.h"
#include "core/json_access.h"
#include "core/kueue.h"

namespace ncclguard::core {
namespace {

// The object at `pointer`, or nullptr when absent; throws when present but not an object.
const Json* ObjectAt(const Json& root, const JsonPointer& pointer) {
  if (!root.contains(pointer)) return nullptr;
  const Json& value = root.at(pointer);
  if (value.is_null()) return nullptr;
  if (!value.is_object()) {
    throw InputError(pointer.to_string() + ": expected an object, found " + value.type_name());
  }
  return &value;
}

Json AddOp(const std::string& path, Json value) {
  return Json{{"op", "add"}, {"path", path}, {"value", std::move(value)}};
}

// The pod's spec.schedulingGates, or nullptr.
const Json* SchedulingGates(const Json& pod) {
  const JsonPointer gates_at("/spec/schedulingGates");
  if (!pod.is_object() || !pod.contains(gates_at) || !pod.at(gates_at).is_array()) return nullptr;
  return &pod.at(gates_at);
}

bool GateNamed(const Json& gate, std::string_view name) {
  if (!gate.is_object()) return false;
  const auto found = gate.find("name");
  return found != gate.end() && found->is_string() && found->get_ref<const std::string&>() == name;
}

}  // namespace

bool ControlledByManagedJob(const Json& object) {
  const auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return false;
  const auto owners = metadata->find("ownerReferences");
  if (owners == metadata->end() || !owners->is_array()) return false;
  return std::any_of(owners->begin(), owners->end(), [](const Json& owner) {
    if (!owner.is_object()) return false;
    // Lenient, as the rest of this file: a `controller` that is not a boolean reads as absent.
    const auto controller = owner.find("controller");
    return controller != owner.end() && *controller == true && ManagedKindOf(owner);
  });
}

bool IsManagedJob(const Json& object, WorkloadKind kind) {
  const KindInfo& info = KindInfoOf(kind);
  if (!info.job || ControlledByManagedJob(object)) return false;
  return info.opt_in_label.empty() || LabelValue(object, info.opt_in_label) == "true";
}

JsonPointer SuspendPointer(WorkloadKind kind) {
  return JsonPointer(std::string(KindInfoOf(kind).suspend_field));
}

namespace {

// The operation that sets the gate annotation to `value`, adding its parents where missing.
Json GateAnnotationOp(const Json& job, std::string_view value) {
  const Json annotations{{std::string(kGateAnnotation), std::string(value)}};
  if (ObjectAt(job, JsonPointer("/metadata")) == nullptr) {
    return AddOp("/metadata", Json{{"annotations", annotations}});
  }
  if (ObjectAt(job, JsonPointer("/metadata/annotations")) == nullptr) {
    return AddOp("/metadata/annotations", annotations);
  }
  return AddOp("/metadata/annotations/" + EscapePointerToken(kGateAnnotation), std::string(value));
}

}  // namespace

Json GateAdmitPatch(const Json& job) { return Json::array({GateAnnotationOp(job, kGateAdmitted)}); }

Json GateMarkPatch(const Json& job, WorkloadKind kind) {
  Json ops = Json::array({GateAnnotationOp(job, kGatePending)});

  // A kind without a suspend field is held by its pods' scheduling gate (PodSchedulingGatePatch).
  if (PodGated(KindInfoOf(kind))) return ops;
  if (ObjectAt(job, JsonPointer("/spec")) == nullptr) {
    throw InputError("/spec: missing; a job without a spec cannot be suspended");
  }
  const JsonPointer suspend = SuspendPointer(kind);
  const JsonPointer parent = suspend.parent_pointer();
  if (parent.to_string() != "/spec" && ObjectAt(job, parent) == nullptr) {
    ops.push_back(AddOp(parent.to_string(), Json{{suspend.back(), true}}));
  } else {
    // "add" on an existing member replaces it (RFC 6902 4.1).
    ops.push_back(AddOp(suspend.to_string(), true));
  }
  return ops;
}

bool HasSchedulingGate(const Json& pod, std::string_view name) {
  const Json* gates = SchedulingGates(pod);
  return gates != nullptr && std::any_of(gates->begin(), gates->end(),
                                         [&](const Json& gate) { return GateNamed(gate, name); });
}

std::optional<WorkloadKind> PodGatedJobOf(const Json& pod) {
  for (const KindInfo& info : ManagedKinds()) {
    if (PodGated(info) && !info.pod_job_label.empty() &&
        !LabelValue(pod, info.pod_job_label).empty()) {
      return info.kind;
    }
  }
  return std::nullopt;
}

bool ManagedByKueue(const Json& pod) {
  return HasSchedulingGate(pod, kKueueAdmissionGate) || QueuedByKueue(pod) ||
         !LabelValue(pod, kKueueManagedLabel).empty();
}

Json PodSchedulingGatePatch(const Json& pod) {
  if (ObjectAt(pod, JsonPointer("/spec")) == nullptr) {
    throw InputError("/spec: missing; a pod without a spec cannot be gated");
  }
  const Json gate{{"name", std::string(kSchedulingGate)}};
  if (SchedulingGates(pod) != nullptr) {
    return Json::array({AddOp("/spec/schedulingGates/-", gate)});
  }
  return Json::array({AddOp("/spec/schedulingGates", Json::array({gate}))});
}

Json SchedulingGatesWithout(const Json& pod, std::string_view name) {
  Json kept = Json::array();
  if (const Json* gates = SchedulingGates(pod)) {
    for (const Json& gate : *gates) {
      if (!GateNamed(gate, name)) kept.push_back(gate);
    }
  }
  return kept;
}

}  // namespace ncclguard::core
