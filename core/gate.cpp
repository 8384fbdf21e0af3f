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

}  // namespace

bool IsManagedJob(const Json& object, WorkloadKind kind) {
  const KindInfo& info = KindInfoOf(kind);
  if (!info.job) return false;
  if (info.opt_in_label.empty()) return true;
  if (!object.is_object()) return false;
  const auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return false;
  const auto labels = metadata->find("labels");
  if (labels == metadata->end() || !labels->is_object()) return false;
  const auto value = labels->find(std::string(info.opt_in_label));
  return value != labels->end() && value->is_string() &&
         value->get_ref<const std::string&>() == "true";
}

JsonPointer SuspendPointer(WorkloadKind kind) {
  return JsonPointer(std::string(KindInfoOf(kind).suspend_field));
}

Json GateMarkPatch(const Json& job, WorkloadKind kind) {
  Json ops = Json::array();
  const std::string annotation_path =
      "/metadata/annotations/" + EscapePointerToken(kGateAnnotation);
  const Json annotations{{std::string(kGateAnnotation), std::string(kGatePending)}};
  if (ObjectAt(job, JsonPointer("/metadata")) == nullptr) {
    ops.push_back(AddOp("/metadata", Json{{"annotations", annotations}}));
  } else if (ObjectAt(job, JsonPointer("/metadata/annotations")) == nullptr) {
    ops.push_back(AddOp("/metadata/annotations", annotations));
  } else {
    ops.push_back(AddOp(annotation_path, std::string(kGatePending)));
  }

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
  const Json* gates = pod.contains(JsonPointer("/spec/schedulingGates"))
                          ? &pod.at(JsonPointer("/spec/schedulingGates"))
                          : nullptr;
  if (gates == nullptr || !gates->is_array()) return false;
  return std::any_of(gates->begin(), gates->end(), [&](const Json& gate) {
    const auto found = gate.is_object() ? gate.find("name") : gate.end();
    return gate.is_object() && found != gate.end() && found->is_string() &&
           found->get_ref<const std::string&>() == name;
  });
}

std::optional<WorkloadKind> PodGatedJobOf(const Json& pod) {
  const auto labels_at = JsonPointer("/metadata/labels");
  if (!pod.is_object() || !pod.contains(labels_at) || !pod.at(labels_at).is_object()) {
    return std::nullopt;
  }
  const Json& labels = pod.at(labels_at);
  for (const KindInfo& info : ManagedKinds()) {
    if (!PodGated(info) || info.pod_job_label.empty()) continue;
    const auto name = labels.find(std::string(info.pod_job_label));
    if (name != labels.end() && name->is_string() && !name->get_ref<const std::string&>().empty()) {
      return info.kind;
    }
  }
  return std::nullopt;
}

bool ManagedByKueue(const Json& pod) {
  if (HasSchedulingGate(pod, kKueueAdmissionGate)) return true;
  const auto labels_at = JsonPointer("/metadata/labels");
  if (!pod.is_object() || !pod.contains(labels_at) || !pod.at(labels_at).is_object()) return false;
  const Json& labels = pod.at(labels_at);
  for (const std::string_view key : {kKueueQueueNameLabel, kKueueManagedLabel}) {
    const auto value = labels.find(std::string(key));
    if (value != labels.end() && value->is_string() &&
        !value->get_ref<const std::string&>().empty())
      return true;
  }
  return false;
}

Json PodSchedulingGatePatch(const Json& pod) {
  if (ObjectAt(pod, JsonPointer("/spec")) == nullptr) {
    throw InputError("/spec: missing; a pod without a spec cannot be gated");
  }
  const Json gate{{"name", std::string(kSchedulingGate)}};
  const JsonPointer gates("/spec/schedulingGates");
  if (pod.contains(gates) && pod.at(gates).is_array()) {
    return Json::array({AddOp("/spec/schedulingGates/-", gate)});
  }
  return Json::array({AddOp("/spec/schedulingGates", Json::array({gate}))});
}

Json SchedulingGatesWithout(const Json& pod, std::string_view name) {
  Json kept = Json::array();
  const JsonPointer gates("/spec/schedulingGates");
  if (!pod.contains(gates) || !pod.at(gates).is_array()) return kept;
  for (const Json& gate : pod.at(gates)) {
    const auto found = gate.is_object() ? gate.find("name") : gate.end();
    if (gate.is_object() && found != gate.end() && found->is_string() &&
        found->get_ref<const std::string&>() == name) {
      continue;
    }
    kept.push_back(gate);
  }
  return kept;
}

}  // namespace ncclguard::core
