#include "manager/projections.h"

#include <algorithm>
#include <string>

#include "controllers/labels.h"
#include "core/contract.h"
#include "core/json_access.h"
#include "core/placement.h"
#include "core/pod_spec.h"

namespace ncclguard::manager {
namespace {

using core::Json;

const Json* Find(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

void CopyIfPresent(const Json& from, Json& to, const char* key) {
  if (const Json* value = Find(from, key)) to[key] = *value;
}

Json Identity(const Json& object) {
  Json metadata = Json::object();
  if (const Json* m = Find(object, "metadata")) {
    for (const char* key : {"name", "namespace", "uid", "resourceVersion"}) {
      CopyIfPresent(*m, metadata, key);
    }
  }
  return Json{{"metadata", std::move(metadata)}};
}

// A terminated/waiting state with only what the diagnoses read.
Json ProjectState(const Json& state) {
  Json out = Json::object();
  for (const char* phase : {"terminated", "waiting"}) {
    const Json* detail = Find(state, phase);
    if (detail == nullptr || !detail->is_object()) continue;
    Json kept = Json::object();
    for (const char* key : {"reason", "exitCode", "signal", "message"}) {
      CopyIfPresent(*detail, kept, key);
    }
    out[phase] = std::move(kept);
  }
  return out;
}

Json ProjectContainerStatuses(const Json& statuses) {
  Json out = Json::array();
  if (!statuses.is_array()) return out;
  for (const Json& s : statuses) {
    Json kept = Json::object();
    CopyIfPresent(s, kept, "name");
    CopyIfPresent(s, kept, "image");
    // The digest the container runs: the image pin's record and drift (core/image_pin.h).
    CopyIfPresent(s, kept, "imageID");
    for (const char* which : {"state", "lastState"}) {
      if (const Json* state = Find(s, which)) {
        Json projected = ProjectState(*state);
        if (!projected.empty()) kept[which] = std::move(projected);
      }
    }
    out.push_back(std::move(kept));
  }
  return out;
}

}  // namespace

kube::Projection JobProjection(core::WorkloadKind kind) {
  const core::KindInfo& info = core::KindInfoOf(kind);
  const std::string api_version(info.api_version);
  const std::string kind_name(info.kind_name);
  return [api_version, kind_name](const Json& object) {
    Json out = Identity(object);
    out["apiVersion"] = object.is_object() ? object.value("apiVersion", api_version) : api_version;
    out["kind"] = object.is_object() ? object.value("kind", kind_name) : kind_name;
    if (const Json* m = Find(object, "metadata")) {
      // creationTimestamp: where the gate's hold time starts
      // (ncclguard_gate_hold_duration_seconds).
      for (const char* key : {"labels", "annotations", "generation", "creationTimestamp",
                              "deletionTimestamp", "ownerReferences"}) {
        CopyIfPresent(*m, out["metadata"], key);
      }
    }
    CopyIfPresent(object, out, "spec");
    if (const Json* status = Find(object, "status")) {
      if (const Json* conditions = Find(*status, "conditions")) {
        out["status"]["conditions"] = *conditions;
      }
    }
    return out;
  };
}

kube::Projection PodProjection() {
  return [](const Json& object) {
    Json out = Identity(object);
    const Json* m = Find(object, "metadata");
    const Json* labels = m != nullptr ? Find(*m, "labels") : nullptr;
    Json job_labels = Json::object();
    for (const core::KindInfo& info : core::ManagedKinds()) {
      const std::string label(info.pod_job_label);
      if (labels != nullptr && labels->is_object() && labels->contains(label)) {
        job_labels[label] = (*labels)[label];
      }
    }
    if (job_labels.empty()) return out;  // no managed job's pod: nothing to read
    // The RAS reader the controller marked (controllers/nccl_health.h); the replica type that
    // tells an MPIJob's launcher (no NCCL) from its workers, and the indexes that give the rank
    // order the job's placement is judged in (core/placement.h).
    const auto keep = [&](std::string_view label) {
      const std::string key(label);
      if (labels->contains(key)) job_labels[key] = (*labels)[key];
    };
    keep(core::kRasReaderLabel);
    for (const std::string_view label : core::kPodIndexLabels) keep(label);
    out["metadata"]["labels"] = std::move(job_labels);
    // Which pod's digest is a job's image pin: the earliest created (core/image_pin.h).
    if (m != nullptr) CopyIfPresent(*m, out["metadata"], "creationTimestamp");
    if (const Json* owners = m != nullptr ? Find(*m, "ownerReferences") : nullptr) {
      Json kept = Json::array();
      if (owners->is_array()) {
        for (const Json& owner : *owners) {
          Json o = Json::object();
          CopyIfPresent(owner, o, "kind");
          CopyIfPresent(owner, o, "controller");
          kept.push_back(std::move(o));
        }
      }
      out["metadata"]["ownerReferences"] = std::move(kept);
    }
    if (const Json* spec = Find(object, "spec")) {
      if (const Json* node = Find(*spec, "nodeName")) out["spec"]["nodeName"] = *node;
      // The pod-level gate (core/gate.h): whose scheduling gate the controller lifts.
      if (const Json* gates = Find(*spec, "schedulingGates"))
        out["spec"]["schedulingGates"] = *gates;
      // Container names, images and their EFA requests: whose logs are read, whether sockets in
      // them are a fallback (controllers/pod_logs.h), which image a digest is of.
      if (const Json* containers = Find(*spec, "containers");
          containers && containers->is_array()) {
        Json kept = Json::array();
        for (const Json& c : *containers) {
          if (!c.is_object()) continue;
          Json o = Json::object();
          CopyIfPresent(c, o, "name");
          CopyIfPresent(c, o, "image");  // the image pin (core/image_pin.h)
          const Json* resources = Find(c, "resources");
          for (const char* which : {"limits", "requests"}) {
            const Json* list = resources != nullptr ? Find(*resources, which) : nullptr;
            const std::string efa_key(core::kEfaResource);
            const Json* efa = list != nullptr ? Find(*list, efa_key.c_str()) : nullptr;
            if (efa != nullptr) o["resources"][which][efa_key] = *efa;
          }
          kept.push_back(std::move(o));
        }
        out["spec"]["containers"] = std::move(kept);
      }
    }
    if (const Json* status = Find(object, "status")) {
      if (const Json* phase = Find(*status, "phase")) out["status"]["phase"] = *phase;
      // The addresses NCCL's RAS names a pod's ranks by (controllers/nccl_health.h).
      CopyIfPresent(*status, out["status"], "podIP");
      CopyIfPresent(*status, out["status"], "podIPs");
      for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
        if (const Json* statuses = Find(*status, list)) {
          out["status"][list] = ProjectContainerStatuses(*statuses);
        }
      }
      if (const Json* conditions = Find(*status, "conditions");
          conditions && conditions->is_array()) {
        Json kept = Json::array();
        for (const Json& c : *conditions) {
          if (!c.is_object() || c.value("type", Json()) != "PodScheduled" ||
              c.value("status", Json()) != "False") {
            continue;
          }
          Json o{{"type", "PodScheduled"}, {"status", "False"}};
          CopyIfPresent(c, o, "reason");
          CopyIfPresent(c, o, "message");
          kept.push_back(std::move(o));
        }
        if (!kept.empty()) out["status"]["conditions"] = std::move(kept);
      }
    }
    return out;
  };
}

namespace {

// Whether a container asks for nvidia.com/gpu (its limits, else its requests, as core/pod_spec.h
// reads them); an unreadable count is kept, for the audit to say what is wrong with it.
bool RequestsGpus(const Json& container) {
  const Json* resources = Find(container, "resources");
  if (resources == nullptr) return false;
  const std::string gpu(core::kGpuResource);
  for (const char* which : {"limits", "requests"}) {
    const Json* list = Find(*resources, which);
    const Json* count = list != nullptr ? Find(*list, gpu.c_str()) : nullptr;
    if (count == nullptr) continue;
    try {
      return core::ParseCount(*count, core::JsonPointer()) > 0;
    } catch (const std::exception&) {
      return true;
    }
  }
  return false;
}

// What the rules read of a container (core/pod_spec.h, core/rules/): the rest (command, args,
// probes, ports, the API server's defaults) is most of a pod and never read.
Json AuditedContainer(const Json& container) {
  Json kept = Json::object();
  for (const char* key :
       {"name", "image", "env", "envFrom", "resources", "securityContext", "volumeMounts"}) {
    CopyIfPresent(container, kept, key);
  }
  return kept;
}

// A volume's name and the sources the rules read (a memory emptyDir for /dev/shm, a hostPath).
Json AuditedVolume(const Json& volume) {
  Json kept = Json::object();
  for (const char* key : {"name", "emptyDir", "hostPath"}) CopyIfPresent(volume, kept, key);
  return kept;
}

}  // namespace

kube::Projection AuditPodProjection() {
  return [](const Json& object) {
    Json out = Identity(object);
    const Json* spec = Find(object, "spec");
    const Json* containers = spec != nullptr ? Find(*spec, "containers") : nullptr;
    if (containers == nullptr || !containers->is_array() ||
        std::none_of(containers->begin(), containers->end(), RequestsGpus)) {
      return out;
    }
    out["apiVersion"] = "v1";
    out["kind"] = "Pod";
    if (const Json* m = Find(object, "metadata")) CopyIfPresent(*m, out["metadata"], "labels");
    Json& kept = out["spec"];
    kept["containers"] = Json::array();
    for (const Json& container : *containers) {
      kept["containers"].push_back(container.is_object() ? AuditedContainer(container) : container);
    }
    if (const Json* volumes = Find(*spec, "volumes")) {
      if (volumes->is_array()) {
        kept["volumes"] = Json::array();
        for (const Json& volume : *volumes) {
          kept["volumes"].push_back(volume.is_object() ? AuditedVolume(volume) : volume);
        }
      } else {
        kept["volumes"] = *volumes;  // the rules say what is wrong with it
      }
    }
    for (const char* key : {"nodeSelector", "hostNetwork", "hostname", "subdomain"}) {
      CopyIfPresent(*spec, kept, key);
    }
    if (const Json* affinity = Find(*spec, "affinity")) {
      if (affinity->is_object()) {
        CopyIfPresent(*affinity, kept["affinity"], "nodeAffinity");
      } else {
        kept["affinity"] = *affinity;
      }
    }
    return out;
  };
}

bool IsAuditedPod(const Json& pod) {
  const Json* kind = Find(pod, "kind");
  return kind != nullptr && *kind == "Pod";
}

kube::Projection ServiceProjection() {
  return kube::KeepFields({"/metadata/labels", "/metadata/annotations", "/metadata/ownerReferences",
                           "/spec/clusterIP", "/spec/publishNotReadyAddresses", "/spec/selector",
                           "/spec/ports"});
}

kube::Projection NodeProjection() {
  // The gate: the instance type and HyperPod's health labels, cordons and HyperPod's taints.
  return kube::KeepFields({"/metadata/labels", "/spec/unschedulable", "/spec/taints"});
}

kube::Projection ObservedNodeProjection() {
  return kube::KeepFields({"/status/capacity/" + core::EscapePointerToken(core::kGpuResource),
                           "/status/capacity/" + core::EscapePointerToken(core::kEfaResource)});
}

kube::Projection NodeValidationProjection() { return kube::KeepFields({"/status"}); }

kube::Projection NamespaceProjection() { return kube::KeepFields({"/metadata/labels"}); }

bool ReadEvent(const Json& event) {
  if (const Json* controller = Find(event, "reportingController");
      controller != nullptr && controller->is_string() &&
      controller->get_ref<const std::string&>() == core::kReportingController) {
    return true;
  }
  const Json* regarding = Find(event, "regarding");
  const Json* kind = regarding != nullptr ? Find(*regarding, "kind") : nullptr;
  const Json* reason = Find(event, "reason");
  return kind != nullptr && *kind == "Pod" && reason != nullptr && *reason == "FailedScheduling";
}

kube::Projection EventProjection() {
  return [](const Json& object) {
    Json out = Identity(object);
    const Json* regarding = Find(object, "regarding");
    const Json* kind = regarding != nullptr ? Find(*regarding, "kind") : nullptr;
    if (kind == nullptr || !kind->is_string()) return out;
    const std::string k = kind->get<std::string>();
    bool relevant = k == "Pod";
    for (const core::KindInfo& info : core::ManagedKinds()) {
      relevant = relevant || k == info.kind_name;
    }
    if (!relevant) return out;
    out["regarding"] = Json{{"kind", k}};
    CopyIfPresent(*regarding, out["regarding"], "name");
    for (const char* key : {"reason", "note", "type"}) CopyIfPresent(object, out, key);
    return out;
  };
}

kube::IndexFunction PodsByJob() {
  return [](const Json& pod) {
    std::vector<std::string> values;
    const std::string ns = controllers::Meta(pod, "namespace");
    for (const core::KindInfo& info : core::ManagedKinds()) {
      if (auto value = controllers::Label(pod, info.pod_job_label)) {
        std::string entry = ns + "/" + std::string(info.pod_job_label) + "=" + *value;
        if (std::find(values.begin(), values.end(), entry) == values.end()) {
          values.push_back(std::move(entry));
        }
      }
    }
    return values;
  };
}

kube::IndexFunction EventsByRegarding() {
  return [](const Json& event) -> std::vector<std::string> {
    const auto regarding = event.find("regarding");
    if (regarding == event.end() || !regarding->is_object()) return {};
    return {controllers::Meta(event, "namespace") + "/" + regarding->value("kind", "") + "/" +
            regarding->value("name", "")};
  };
}

}  // namespace ncclguard::manager
