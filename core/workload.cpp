#include "core/workload.h"

#include <string_view>

#include "core/errors.h"
#include "core/json_access.h"

namespace ncclguard::core {

namespace {

// A PodTemplateSpec at `at` contributes a template only if it is present.
void AddTemplate(const Json& object, const JsonPointer& template_spec, std::string role,
                 std::int64_t pods, std::int64_t ranks_per_pod, Workload& workload) {
  const Json* tmpl = OptionalObject(object, template_spec);
  if (tmpl == nullptr) return;
  const JsonPointer pod_spec = template_spec / "spec";
  if (OptionalObject(object, pod_spec) == nullptr) return;
  workload.templates.push_back({std::move(role), pod_spec, pods, ranks_per_pod});
}

// Kubeflow replica specs: a map of role -> {replicas, template}.
void AddReplicaSpecs(const Json& object, const JsonPointer& specs_at, std::int64_t ranks_per_pod,
                     Workload& workload) {
  const Json* specs = OptionalObject(object, specs_at);
  if (specs == nullptr) return;
  for (const auto& [role, spec] : specs->items()) {
    const JsonPointer at = specs_at / role;
    if (!spec.is_object()) throw InputError(at.to_string() + ": expected an object");
    const std::int64_t replicas = OptionalInteger(object, at / "replicas").value_or(1);
    if (replicas < 0) throw InputError((at / "replicas").to_string() + ": must not be negative");
    AddTemplate(object, at / "template", role, replicas, ranks_per_pod, workload);
  }
}

// HyperPod replica specs: a list of {name, replicas, template}.
void AddReplicaSpecList(const Json& object, const JsonPointer& list_at, std::int64_t ranks_per_pod,
                        Workload& workload) {
  const Json* list = OptionalArray(object, list_at);
  if (list == nullptr) return;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const JsonPointer at = list_at / i;
    if (!(*list)[i].is_object()) throw InputError(at.to_string() + ": expected an object");
    const std::int64_t replicas = OptionalInteger(object, at / "replicas").value_or(1);
    if (replicas < 0) throw InputError((at / "replicas").to_string() + ": must not be negative");
    AddTemplate(object, at / "template", OptionalString(object, at / "name").value_or(""), replicas,
                ranks_per_pod, workload);
  }
}

// Declared processes per pod: nprocPerNode is an integer, a string integer, or
// "auto"/"gpu"/"cpu" (decided at run time); slotsPerWorker an integer. 0 = unset or unknown.
std::int64_t RanksPerPod(const Json& object, std::string_view pointer) {
  if (pointer.empty()) return 0;
  const JsonPointer at{std::string(pointer)};
  if (!object.contains(at)) return 0;
  const Json& value = object.at(at);
  if (value.is_number_integer()) return value.get<std::int64_t>();
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    std::int64_t parsed = 0;
    for (char c : text) {
      if (c < '0' || c > '9') return 0;
      parsed = parsed * 10 + (c - '0');
      if (parsed > 1'000'000) return 0;
    }
    return parsed;
  }
  throw InputError(at.to_string() + ": expected an integer or a string");
}

// JobSet replicated jobs: a list of {name, replicas, template: a JobTemplateSpec}; each starts
// replicas x parallelism pods.
void AddReplicatedJobs(const Json& object, const JsonPointer& list_at, std::int64_t ranks_per_pod,
                       Workload& workload) {
  const Json* list = OptionalArray(object, list_at);
  if (list == nullptr) return;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const JsonPointer at = list_at / i;
    if (!(*list)[i].is_object()) throw InputError(at.to_string() + ": expected an object");
    const std::string name = OptionalString(object, at / "name").value_or("");
    const std::int64_t replicas = OptionalInteger(object, at / "replicas").value_or(1);
    const std::int64_t parallelism =
        OptionalInteger(object, at / "template" / "spec" / "parallelism").value_or(1);
    AddTemplate(object, at / "template" / "spec" / "template", name, replicas * parallelism,
                ranks_per_pod, workload);
  }
}

}  // namespace

std::optional<Workload> ParseWorkload(const Json& object, const RuntimeLookup& runtimes) {
  if (!object.is_object()) return std::nullopt;
  auto api_version = object.find("apiVersion");
  auto kind_field = object.find("kind");
  if (api_version == object.end() || kind_field == object.end() || !api_version->is_string() ||
      !kind_field->is_string()) {
    return std::nullopt;
  }
  const auto kind =
      KindOf(api_version->get_ref<const std::string&>(), kind_field->get_ref<const std::string&>());
  if (!kind) return std::nullopt;

  const KindInfo& info = KindInfoOf(*kind);
  const JsonPointer templates{std::string(info.templates)};
  Workload workload{*kind, {}, nullptr, false};
  switch (info.layout) {
    case TemplateLayout::PodSpec:
      if (OptionalObject(object, templates) != nullptr) {
        workload.templates.push_back({"", templates, 1, 0});
      }
      break;
    case TemplateLayout::JobTemplate: {
      std::int64_t pods = OptionalInteger(object, JsonPointer("/spec/parallelism")).value_or(1);
      const auto mode = OptionalString(object, JsonPointer("/spec/completionMode"));
      const auto completions = OptionalInteger(object, JsonPointer("/spec/completions"));
      // An Indexed Job's ranks are its completion indexes; all must run for a rendezvous.
      if (mode && *mode == "Indexed" && completions) pods = *completions;
      AddTemplate(object, templates, "", pods, 0, workload);
      break;
    }
    case TemplateLayout::ReplicaSpecs:
      AddReplicaSpecs(object, templates, RanksPerPod(object, info.ranks_per_pod), workload);
      break;
    case TemplateLayout::ReplicaSpecList:
      AddReplicaSpecList(object, templates, RanksPerPod(object, info.ranks_per_pod), workload);
      break;
    case TemplateLayout::ReplicatedJobs:
      AddReplicatedJobs(object, templates, 0, workload);
      break;
    case TemplateLayout::TrainerRuntime: {
      std::optional<Json> runtime;
      const auto ref = RuntimeRefOf(object);
      if (ref && runtimes) {
        runtime =
            runtimes(*ref, OptionalString(object, JsonPointer("/metadata/namespace")).value_or(""));
      }
      workload.rendered =
          std::make_shared<const Json>(RenderTrainJob(object, runtime ? &*runtime : nullptr));
      workload.runtime_missing = !runtime;
      AddReplicatedJobs(*workload.rendered, templates, RanksPerPod(object, info.ranks_per_pod),
                        workload);
      break;
    }
  }
  return workload;
}

std::int64_t RankPods(const Workload& workload) {
  const KindInfo& info = KindInfoOf(workload.kind);
  std::int64_t pods = 0;
  for (const PodTemplate& tmpl : workload.templates) {
    if (!RunsRanks(info, tmpl.role)) continue;
    pods += tmpl.pods;
  }
  return pods;
}

}  // namespace ncclguard::core
