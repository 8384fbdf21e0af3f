#include "core/trainjob.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/errors.h"
#include "core/json_access.h"

namespace ncclguard::core {
namespace {

// The label Trainer marks its trainer replicatedJob with, besides the name "node".
constexpr std::string_view kAncestorLabel = "trainer.kubeflow.org/trainjob-ancestor-step";

Json& ObjectField(Json& parent, const char* key) {
  Json& field = parent[key];
  if (!field.is_object()) field = Json::object();
  return field;
}

// A string as a map key, apart from the JSON text of other values ("s" + text). Built by append:
// `"s" + std::string` makes GCC 12 at -O3 warn of an overlapping memcpy that cannot happen.
std::string StringKey(std::string_view text) {
  std::string key;
  key.reserve(text.size() + 1);
  key.push_back('s');
  key.append(text);
  return key;
}

// The value of an entry's `key` as a map key ("" when it has none: such entries never match).
std::string KeyOf(const Json& entry, const char* key) {
  if (!entry.is_object()) return {};
  const auto found = entry.find(key);
  if (found == entry.end()) return {};
  if (found->is_string()) return StringKey(found->get_ref<const std::string&>());
  std::string value = found->dump();
  value.insert(value.begin(), 'j');
  return value;
}

// Merges `entries` into the list `into` by the field `key`: an entry of the same key replaces the
// one there, a new one is appended. Linear: positions are found through an index, so a list of
// 100,000 variables costs no more than reading it.
void MergeByKey(Json& into, const Json& entries, const char* key) {
  if (!into.is_array()) into = Json::array();
  std::unordered_map<std::string, std::size_t> at;
  at.reserve(into.size() + entries.size());
  for (std::size_t i = 0; i < into.size(); ++i) {
    std::string k = KeyOf(into[i], key);
    if (!k.empty()) at.try_emplace(std::move(k), i);
  }
  for (const Json& entry : entries) {
    std::string k = KeyOf(entry, key);
    const auto same = k.empty() ? at.end() : at.find(k);
    if (same != at.end()) {
      into[same->second] = entry;
      continue;
    }
    if (!k.empty()) at.emplace(std::move(k), into.size());
    into.push_back(entry);
  }
}

// The keys of a list's entries, for the "is it new" questions of a runtime patch.
std::unordered_set<std::string> KeysOf(const Json* list, const char* key) {
  std::unordered_set<std::string> keys;
  if (list == nullptr || !list->is_array()) return keys;
  for (const Json& entry : *list) {
    std::string k = KeyOf(entry, key);
    if (!k.empty()) keys.insert(std::move(k));
  }
  return keys;
}

// Objects merge key by key, anything else is replaced.
void DeepMerge(Json& into, const Json& patch) {
  if (!into.is_object() || !patch.is_object()) {
    into = patch;
    return;
  }
  for (const auto& [key, value] : patch.items()) DeepMerge(into[key], value);
}

void MergeMetadata(Json& into, const Json* patch) {
  if (patch == nullptr) return;
  for (const char* key : {"labels", "annotations"}) {
    const auto field = patch->find(key);
    if (field == patch->end() || !field->is_object()) continue;
    Json& target = ObjectField(into, key);
    for (const auto& [name, value] : field->items()) target[name] = value;
  }
}

bool IsTrainerJob(const Json& job) {
  if (!job.is_object()) return false;
  const auto name = job.find("name");
  if (name != job.end() && name->is_string() && *name == std::string(kTrainerNode)) return true;
  const JsonPointer label_at =
      JsonPointer("/template/metadata/labels") / std::string(kAncestorLabel);
  return job.contains(label_at) && job.at(label_at) == "trainer";
}

Json* FindByName(Json& list, std::string_view name) {
  if (!list.is_array()) return nullptr;
  for (Json& entry : list) {
    if (entry.is_object() && entry.contains("name") && entry["name"] == std::string(name)) {
      return &entry;
    }
  }
  return nullptr;
}

Json& PodSpecOf(Json& job) {
  return ObjectField(ObjectField(ObjectField(ObjectField(job, "template"), "spec"), "template"),
                     "spec");
}

void ApplyTrainer(const Json& trainjob, Json& jobset, std::optional<std::int64_t> runtime_nodes) {
  const JsonPointer at("/spec/trainer");
  const Json* trainer = OptionalObject(trainjob, at);
  const auto nodes = OptionalInteger(trainjob, at / "numNodes");
  Json& jobs = jobset["spec"]["replicatedJobs"];
  Json* node_job = nullptr;
  for (Json& job : jobs) {
    if (IsTrainerJob(job)) {
      node_job = &job;
      break;
    }
  }
  if (node_job == nullptr) return;  // a runtime without a trainer job: nothing to apply it to
  if (const auto count = nodes ? nodes : runtime_nodes) {
    Json& job_spec = ObjectField(ObjectField(*node_job, "template"), "spec");
    job_spec["parallelism"] = *count;
    job_spec["completions"] = *count;
  }
  if (trainer == nullptr) return;
  Json& pod_spec = PodSpecOf(*node_job);
  if (!pod_spec["containers"].is_array()) pod_spec["containers"] = Json::array();
  Json* container = FindByName(pod_spec["containers"], kTrainerNode);
  if (container == nullptr) {
    pod_spec["containers"].push_back(Json{{"name", std::string(kTrainerNode)}});
    container = &pod_spec["containers"].back();
  }
  if (const auto image = OptionalString(trainjob, at / "image")) (*container)["image"] = *image;
  for (const char* list : {"command", "args"}) {
    if (const Json* value = OptionalArray(trainjob, at / list)) (*container)[list] = *value;
  }
  if (const Json* env = OptionalArray(trainjob, at / "env")) {
    MergeByKey((*container)["env"], *env, "name");
  }
  if (const Json* resources = OptionalObject(trainjob, at / "resourcesPerNode")) {
    (*container)["resources"] = *resources;
  }
}

void PatchContainers(Json& into, const Json& patches) {
  if (!into.is_array()) return;
  std::unordered_map<std::string, std::size_t> by_name;
  for (std::size_t i = 0; i < into.size(); ++i) by_name.try_emplace(KeyOf(into[i], "name"), i);
  for (const Json& patch : patches) {
    const auto found = by_name.find(KeyOf(patch, "name"));
    // Trainer patches only the containers the runtime has.
    if (found == by_name.end() || found->first.empty()) continue;
    Json* container = &into[found->second];
    if (const auto env = patch.find("env"); env != patch.end() && env->is_array()) {
      MergeByKey((*container)["env"], *env, "name");
    }
    if (const auto mounts = patch.find("volumeMounts");
        mounts != patch.end() && mounts->is_array()) {
      MergeByKey((*container)["volumeMounts"], *mounts, "mountPath");
    }
    if (const auto context = patch.find("securityContext");
        context != patch.end() && context->is_object()) {
      DeepMerge((*container)["securityContext"], *context);
    }
  }
}

void PatchPodSpec(Json& spec, const Json& patch) {
  for (const auto& [key, value] : patch.items()) {
    if (key == "volumes" && value.is_array()) {
      MergeByKey(spec["volumes"], value, "name");
    } else if ((key == "containers" || key == "initContainers") && value.is_array()) {
      PatchContainers(spec[key], value);
    } else if (key == "nodeSelector" && value.is_object()) {
      for (const auto& [label, wanted] : value.items())
        ObjectField(spec, "nodeSelector")[label] = wanted;
    } else if ((key == "tolerations" || key == "schedulingGates" || key == "imagePullSecrets") &&
               value.is_array()) {
      if (!spec[key].is_array()) spec[key] = Json::array();
      for (const Json& item : value) spec[key].push_back(item);
    } else {
      spec[key] = value;
    }
  }
}

void ApplyRuntimePatches(const Json& trainjob, Json& jobset) {
  const JsonPointer patches_at("/spec/runtimePatches");
  const Json* patches = OptionalArray(trainjob, patches_at);
  if (patches == nullptr) return;
  Json& rendered_jobs = jobset["spec"]["replicatedJobs"];
  std::unordered_map<std::string, std::size_t> job_at;
  for (std::size_t i = 0; i < rendered_jobs.size(); ++i) {
    job_at.try_emplace(KeyOf(rendered_jobs[i], "name"), i);
  }
  for (std::size_t i = 0; i < patches->size(); ++i) {
    const JsonPointer at = patches_at / i / "trainingRuntimeSpec" / "template";
    if (OptionalObject(trainjob, at) == nullptr) continue;
    MergeMetadata(ObjectField(jobset, "metadata"), OptionalObject(trainjob, at / "metadata"));
    const JsonPointer jobs_at = at / "spec" / "replicatedJobs";
    const Json* jobs = OptionalArray(trainjob, jobs_at);
    if (jobs == nullptr) continue;
    for (std::size_t j = 0; j < jobs->size(); ++j) {
      const auto name = OptionalString(trainjob, jobs_at / j / "name");
      const auto found = name ? job_at.find(StringKey(*name)) : job_at.end();
      if (found == job_at.end()) continue;
      Json* job = &rendered_jobs[found->second];
      const JsonPointer job_template = jobs_at / j / "template";
      MergeMetadata(ObjectField(ObjectField(*job, "template"), "metadata"),
                    OptionalObject(trainjob, job_template / "metadata"));
      const JsonPointer pod_template = job_template / "spec" / "template";
      Json& pod = ObjectField(ObjectField(ObjectField(*job, "template"), "spec"), "template");
      MergeMetadata(ObjectField(pod, "metadata"),
                    OptionalObject(trainjob, pod_template / "metadata"));
      if (const Json* spec = OptionalObject(trainjob, pod_template / "spec")) {
        PatchPodSpec(ObjectField(pod, "spec"), *spec);
      }
    }
  }
}

const Json* PodSpecIn(const Json& job) {
  const JsonPointer at("/template/spec/template/spec");
  return job.is_object() && job.contains(at) && job.at(at).is_object() ? &job.at(at) : nullptr;
}

const Json* Field(const Json& object, const char* key) {
  const auto found = object.find(key);
  return found == object.end() ? nullptr : &*found;
}

// What a patch may say about one container: its securityContext when the fixes changed it, the
// volumeMounts they added.
std::optional<Json> ContainerPatch(const Json& before, const Json& after) {
  Json patch{{"name", after["name"]}};
  const Json* context = Field(after, "securityContext");
  const Json* old_context = Field(before, "securityContext");
  if (context != nullptr && (old_context == nullptr || *old_context != *context)) {
    patch["securityContext"] = *context;
  }
  if (const Json* mounts = Field(after, "volumeMounts"); mounts != nullptr && mounts->is_array()) {
    const auto existing = KeysOf(Field(before, "volumeMounts"), "mountPath");
    for (const Json& mount : *mounts) {
      const std::string k = KeyOf(mount, "mountPath");
      if (!k.empty() && !existing.contains(k)) patch["volumeMounts"].push_back(mount);
    }
  }
  if (patch.size() == 1) return std::nullopt;
  return patch;
}

// The annotations the fixes added to a replicatedJob's pod template (Kueue's topology request).
std::optional<Json> AddedAnnotations(const Json& before, const Json& after) {
  const JsonPointer at("/template/spec/template/metadata/annotations");
  if (!after.contains(at) || !after.at(at).is_object()) return std::nullopt;
  const Json* old = before.contains(at) ? &before.at(at) : nullptr;
  Json added = Json::object();
  for (const auto& [key, value] : after.at(at).items()) {
    if (old == nullptr || !old->is_object() || !old->contains(key)) added[key] = value;
  }
  if (added.empty()) return std::nullopt;
  return added;
}

std::optional<Json> PodSpecPatch(const Json& before, const Json& after) {
  Json patch = Json::object();
  if (const Json* volumes = Field(after, "volumes"); volumes != nullptr && volumes->is_array()) {
    const auto existing = KeysOf(Field(before, "volumes"), "name");
    for (const Json& volume : *volumes) {
      const std::string k = KeyOf(volume, "name");
      if (!k.empty() && !existing.contains(k)) patch["volumes"].push_back(volume);
    }
  }
  const Json* containers = Field(after, "containers");
  const Json* old_containers = Field(before, "containers");
  if (containers != nullptr && containers->is_array() && old_containers != nullptr &&
      old_containers->is_array()) {
    std::unordered_map<std::string, const Json*> old_by_name;
    for (const Json& c : *old_containers) old_by_name.try_emplace(KeyOf(c, "name"), &c);
    for (const Json& container : *containers) {
      const auto old = old_by_name.find(KeyOf(container, "name"));
      if (old == old_by_name.end() || old->first.empty()) continue;
      if (auto changed = ContainerPatch(*old->second, container)) {
        patch["containers"].push_back(std::move(*changed));
      }
    }
  }
  if (patch.empty()) return std::nullopt;
  return patch;
}

}  // namespace

std::optional<RuntimeRef> RuntimeRefOf(const Json& trainjob) {
  const JsonPointer at("/spec/runtimeRef");
  const auto name = OptionalString(trainjob, at / "name");
  if (!name || name->empty()) return std::nullopt;
  const std::string kind = OptionalString(trainjob, at / "kind").value_or("ClusterTrainingRuntime");
  for (const KindInfo& info : TemplateKinds()) {
    if (info.kind_name == kind) return RuntimeRef{info.kind, *name};
  }
  return std::nullopt;
}

Json RenderTrainJob(const Json& trainjob, const Json* runtime) {
  Json jobset{{"apiVersion", "jobset.x-k8s.io/v1alpha2"}, {"kind", "JobSet"}};
  Json& metadata = jobset["metadata"];
  metadata = Json::object();
  for (const char* key : {"name", "namespace"}) {
    if (const auto value = OptionalString(trainjob, JsonPointer("/metadata") / key)) {
      metadata[key] = *value;
    }
  }
  std::optional<std::int64_t> runtime_nodes;
  const JsonPointer template_at("/spec/template");
  if (runtime != nullptr && OptionalObject(*runtime, template_at / "spec") != nullptr) {
    jobset["spec"] = runtime->at(template_at / "spec");
    MergeMetadata(metadata, OptionalObject(*runtime, template_at / "metadata"));
    runtime_nodes = OptionalInteger(*runtime, JsonPointer("/spec/mlPolicy/numNodes"));
  } else {
    jobset["spec"] =
        Json{{"replicatedJobs",
              Json::array({Json{
                  {"name", std::string(kTrainerNode)},
                  {"replicas", 1},
                  {"template",
                   {{"spec",
                     {{"template",
                       {{"spec",
                         {{"containers",
                           Json::array({Json{{"name", std::string(kTrainerNode)}}})}}}}}}}}}}})}};
  }
  Json& jobs = jobset["spec"]["replicatedJobs"];
  if (!jobs.is_array()) {
    throw InputError("the runtime's /spec/template/spec/replicatedJobs: expected a list");
  }
  for (const Json& job : jobs) {
    if (!job.is_object()) {
      throw InputError("the runtime's /spec/template/spec/replicatedJobs: expected objects");
    }
  }
  ApplyTrainer(trainjob, jobset, runtime_nodes);
  ApplyRuntimePatches(trainjob, jobset);
  return jobset;
}

std::optional<Json> RuntimePatchOf(const Json& rendered, const Json& fixed) {
  const JsonPointer jobs_at("/spec/replicatedJobs");
  if (!rendered.contains(jobs_at) || !fixed.contains(jobs_at)) return std::nullopt;
  const Json& before = rendered.at(jobs_at);
  const Json& after = fixed.at(jobs_at);
  if (!before.is_array() || !after.is_array() || before.size() != after.size()) return std::nullopt;
  Json jobs = Json::array();
  for (std::size_t i = 0; i < after.size(); ++i) {
    const Json* old_spec = PodSpecIn(before[i]);
    const Json* new_spec = PodSpecIn(after[i]);
    if (old_spec == nullptr || new_spec == nullptr) continue;
    Json pod = Json::object();
    if (auto annotations = AddedAnnotations(before[i], after[i])) {
      pod["metadata"] = {{"annotations", std::move(*annotations)}};
    }
    if (auto spec = PodSpecPatch(*old_spec, *new_spec)) pod["spec"] = std::move(*spec);
    if (pod.empty()) continue;
    jobs.push_back(Json{{"name", after[i].value("name", "")},
                        {"template", {{"spec", {{"template", std::move(pod)}}}}}});
  }
  if (jobs.empty()) return std::nullopt;
  return Json{{"manager", std::string(kRuntimePatchManager)},
              {"trainingRuntimeSpec", {{"template", {{"spec", {{"replicatedJobs", jobs}}}}}}}};
}

bool HasRuntimePatch(const Json& trainjob) {
  const Json* patches = OptionalArray(trainjob, JsonPointer("/spec/runtimePatches"));
  return KeysOf(patches, "manager").contains(StringKey(kRuntimePatchManager));
}

}  // namespace ncclguard::core
