#include "core/gate.h"

#include "core/errors.h"
#include "core/json_access.h"

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

}  // namespace ncclguard::core
