#include "tests/unit/controllers/fake_cluster.h"

#include <variant>

#include "controllers/job_kind.h"
#include "controllers/labels.h"

namespace ncclguard::test {
namespace {

std::string Str(const Json& object, const char* a, const char* b) {
  if (!object.contains(a) || !object[a].is_object() || !object[a].contains(b)) return "";
  const Json& v = object[a][b];
  return v.is_string() ? v.get<std::string>() : "";
}

}  // namespace

FakeCluster::FakeCluster() : policy_(core::Policy::Defaults()) {}

void FakeCluster::AddNamespace(const std::string& name, bool enabled) {
  Json ns{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}};
  if (enabled) ns["metadata"]["labels"]["ncclguard.io/enabled"] = "true";
  namespaces_[name] = ns;
}

void FakeCluster::LabelNamespace(const std::string& name, const std::string& key,
                                 const std::string& value) {
  namespaces_.at(name)["metadata"]["labels"][key] = value;
}

void FakeCluster::AddJob(Json job) {
  if (Str(job, "metadata", "uid").empty()) {
    job["metadata"]["uid"] = "uid-" + Str(job, "metadata", "name");
  }
  job["metadata"]["resourceVersion"] = std::to_string(next_version_++);
  const auto kind = core::ManagedKindOf(job);
  const JobKey key{*kind, Str(job, "metadata", "namespace"), Str(job, "metadata", "name")};
  jobs_[key.ToString()] = std::move(job);
}

void FakeCluster::AddPod(Json pod) { pods_.push_back(std::move(pod)); }

void FakeCluster::AddService(Json service) {
  // Assignment evaluates its right side first: take the key before moving.
  const std::string key =
      Str(service, "metadata", "namespace") + "/" + Str(service, "metadata", "name");
  services_[key] = std::move(service);
}

void FakeCluster::AddNode(const std::string& name, const std::string& instance_type,
                          const std::string& summary, Json checks, bool cordoned) {
  Json node{{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata",
             {{"name", name}, {"labels", {{"node.kubernetes.io/instance-type", instance_type}}}}}};
  if (cordoned) node["spec"]["unschedulable"] = true;
  nodes_.push_back(node);
  if (!summary.empty()) {
    validations_[name] = Json{
        {"apiVersion", "ncclguard.io/v1alpha1"},
        {"kind", "NodeValidation"},
        {"metadata", {{"name", name}}},
        {"status",
         {{"instanceType", instance_type}, {"summary", summary}, {"checks", std::move(checks)}}}};
  }
}

void FakeCluster::AddEvent(Json event) { events_.push_back(std::move(event)); }

Json& FakeCluster::JobObject(const JobKey& key) { return jobs_.at(key.ToString()); }

Json& FakeCluster::NodeObject(const std::string& name) {
  for (Json& node : nodes_) {
    if (Str(node, "metadata", "name") == name) return node;
  }
  throw std::out_of_range("no node " + name);
}

Json& FakeCluster::PodObject(const std::string& ns, const std::string& name) {
  for (Json& pod : pods_) {
    if (Str(pod, "metadata", "namespace") == ns && Str(pod, "metadata", "name") == name) return pod;
  }
  throw std::out_of_range("no pod " + ns + "/" + name);
}

std::optional<std::string> FakeCluster::ApplyPatch(const controllers::MergePatch& patch) {
  if (patch.target.kind == "Pod") {
    Json& pod = PodObject(patch.target.namespace_, patch.target.name);
    Json body = patch.patch;
    if (body.contains("metadata") && body["metadata"].contains("resourceVersion")) {
      if (body["metadata"]["resourceVersion"] != pod["metadata"]["resourceVersion"]) {
        return std::nullopt;
      }
      body["metadata"].erase("resourceVersion");
    }
    pod.merge_patch(body);
    pod["metadata"]["resourceVersion"] = std::to_string(next_version_++);
    return pod["metadata"]["resourceVersion"].get<std::string>();
  }
  if (patch.target.kind == "Service") {
    Json& service = services_.at(patch.target.namespace_ + "/" + patch.target.name);
    service.merge_patch(patch.patch);
    return std::string();
  }
  for (auto& [key, job] : jobs_) {
    if (Str(job, "metadata", "name") != patch.target.name ||
        Str(job, "metadata", "namespace") != patch.target.namespace_ ||
        job["kind"] != patch.target.kind) {
      continue;
    }
    Json body = patch.patch;
    if (body.contains("metadata") && body["metadata"].contains("resourceVersion")) {
      if (body["metadata"]["resourceVersion"] != job["metadata"]["resourceVersion"]) {
        return std::nullopt;
      }
      body["metadata"].erase("resourceVersion");
    }
    // The status subresource takes only status; the main resource ignores status.
    if (patch.status_subresource) {
      Json status_only = Json::object();
      if (body.contains("status")) status_only["status"] = body["status"];
      job.merge_patch(status_only);
    } else {
      body.erase("status");
      job.merge_patch(body);
    }
    job["metadata"]["resourceVersion"] = std::to_string(next_version_++);
    return job["metadata"]["resourceVersion"].get<std::string>();
  }
  return std::nullopt;
}

int FakeCluster::Apply(const std::vector<controllers::Action>& actions) {
  int failed = 0;
  controllers::PatchVersions versions;
  for (const controllers::Action& action : actions) {
    if (const auto* create = std::get_if<controllers::CreateObject>(&action)) {
      const std::string key = create->target.namespace_ + "/" + create->target.name;
      if (services_.contains(key)) {
        ++failed;
        continue;
      }
      services_[key] = create->object;
    } else if (const auto* patch = std::get_if<controllers::MergePatch>(&action)) {
      // As the executor sends them: a later patch of an object names the version the earlier
      // one made.
      controllers::MergePatch sent = *patch;
      sent.patch = versions.Resolve(*patch);
      if (const std::optional<std::string> version = ApplyPatch(sent)) {
        versions.Wrote(*patch, *version);
      } else {
        return failed + 1;  // a Conflict: the executor sends nothing more
      }
    } else if (const auto* event = std::get_if<controllers::RecordEvent>(&action)) {
      events_.push_back(controllers::EventObject(*event, "test", "2026-12-02T14:00:00.000000Z"));
    }
  }
  return failed;
}

std::optional<Json> FakeCluster::Job(const JobKey& key) const {
  const auto it = jobs_.find(key.ToString());
  if (it == jobs_.end()) return std::nullopt;
  return it->second;
}

std::vector<Json> FakeCluster::PodsWithLabel(std::string_view ns, std::string_view key,
                                             std::string_view value) const {
  std::vector<Json> out;
  for (const Json& pod : pods_) {
    if (Str(pod, "metadata", "namespace") == ns && controllers::Label(pod, key) == value) {
      out.push_back(pod);
    }
  }
  return out;
}

std::optional<Json> FakeCluster::Service(std::string_view ns, std::string_view name) const {
  const auto it = services_.find(std::string(ns) + "/" + std::string(name));
  if (it == services_.end()) return std::nullopt;
  return it->second;
}

std::vector<Json> FakeCluster::NodesWithLabel(std::string_view key, std::string_view value) const {
  std::vector<Json> out;
  for (const Json& node : nodes_) {
    if (controllers::Label(node, key) == value) out.push_back(node);
  }
  return out;
}

std::optional<Json> FakeCluster::Node(std::string_view name) const {
  for (const Json& node : nodes_) {
    if (controllers::Meta(node, "name") == name) return node;
  }
  return std::nullopt;
}

std::optional<Json> FakeCluster::NodeValidation(std::string_view node) const {
  const auto it = validations_.find(std::string(node));
  if (it == validations_.end()) return std::nullopt;
  return it->second;
}

std::optional<Json> FakeCluster::Runtime(const core::RuntimeRef& ref, std::string_view ns) const {
  const core::KindInfo& info = core::KindInfoOf(ref.kind);
  for (const Json& runtime : runtimes_) {
    if (runtime.value("kind", "") != info.kind_name) continue;
    if (runtime["metadata"].value("name", "") != ref.name) continue;
    if (!info.cluster_scoped && runtime["metadata"].value("namespace", "") != ns) continue;
    return runtime;
  }
  return std::nullopt;
}

std::optional<Json> FakeCluster::Namespace(std::string_view name) const {
  const auto it = namespaces_.find(std::string(name));
  if (it == namespaces_.end()) return std::nullopt;
  return it->second;
}

std::vector<Json> FakeCluster::EventsAbout(std::string_view ns, std::string_view kind,
                                           std::string_view name) const {
  std::vector<Json> out;
  for (const Json& e : events_) {
    const char* about = e.contains("regarding") ? "regarding" : "involvedObject";
    if (Str(e, about, "kind") == kind && Str(e, about, "name") == name &&
        Str(e, "metadata", "namespace") == ns) {
      out.push_back(e);
    }
  }
  return out;
}

Json P5PyTorchJob(const std::string& ns, const std::string& name, int workers, bool gate_pending) {
  const Json pod_template = {
      {"spec",
       {{"nodeSelector", {{"node.kubernetes.io/instance-type", "p5.48xlarge"}}},
        {"containers",
         {{{"name", "pytorch"},
           {"image", "nvcr.io/nvidia/pytorch:24.07-py3"},
           {"resources",
            {{"limits", {{"nvidia.com/gpu", 8}, {"vpc.amazonaws.com/efa", 32}}}}}}}}}}};
  Json job{{"apiVersion", "kubeflow.org/v1"},
           {"kind", "PyTorchJob"},
           {"metadata", {{"name", name}, {"namespace", ns}}},
           {"spec",
            {{"runPolicy", {{"suspend", gate_pending}}},
             {"pytorchReplicaSpecs",
              {{"Master", {{"replicas", 1}, {"template", pod_template}}},
               {"Worker", {{"replicas", workers}, {"template", pod_template}}}}}}}};
  if (gate_pending) job["metadata"]["annotations"]["ncclguard.io/gate"] = "pending";
  return job;
}

Json KubeflowPod(const std::string& ns, const std::string& job, const std::string& name,
                 Json status, const std::string& node) {
  Json pod{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name}, {"namespace", ns}, {"labels", {{"training.kubeflow.org/job-name", job}}}}},
      {"spec", Json::object()},
      {"status", std::move(status)}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod;
}

Json Terminated(const std::string& container, int exit_code, const std::string& reason,
                const std::string& message) {
  Json terminated{{"exitCode", exit_code}, {"reason", reason}};
  if (!message.empty()) terminated["message"] = message;
  return Json{{"containerStatuses",
               {{{"name", container},
                 {"image", "nvcr.io/nvidia/pytorch:24.07-py3"},
                 {"state", {{"terminated", terminated}}}}}}};
}

Json EfaFailure() {
  return Json::array({{{"id", "efa-device-count"},
                       {"status", "Fail"},
                       {"observed", "30"},
                       {"expected", "32"},
                       {"message", "30 of 32 EFA devices"}}});
}

Json QueuedP5Workload(const std::string& ns, int pods, controllers::Timestamp reserved) {
  const Json gpu = {
      {"spec",
       {{"containers", Json::array({{{"name", "trainer"},
                                     {"image", "trainer:1"},
                                     {"resources", {{"limits", {{"nvidia.com/gpu", "8"}}}}}}})}}}};
  return {
      {"apiVersion", "kueue.x-k8s.io/v1beta2"},
      {"kind", "Workload"},
      {"metadata", {{"name", "pytorchjob-llama-1a2b3"}, {"namespace", ns}, {"uid", "u1"}}},
      {"spec",
       {{"podSets", Json::array({{{"name", "worker"}, {"count", pods}, {"template", gpu}}})}}},
      {"status",
       {{"conditions", Json::array({{{"type", "QuotaReserved"},
                                     {"status", "True"},
                                     {"lastTransitionTime", controllers::FormatTime(reserved)}}})},
        {"admission",
         {{"podSetAssignments",
           Json::array(
               {{{"name", "worker"}, {"count", pods}, {"flavors", {{"nvidia.com/gpu", "p5"}}}}})}}},
        {"admissionChecks",
         Json::array({{{"name", "preflight"},
                       {"state", "Pending"},
                       {"message", ""},
                       {"lastTransitionTime", controllers::FormatTime(reserved)}}})}}}};
}

controllers::KueueObjects P5KueueObjects() {
  controllers::KueueObjects objects;
  objects.preflight_checks = {"preflight"};
  objects.flavor = [](std::string_view name) -> std::optional<Json> {
    if (name != "p5") return std::nullopt;
    return Json{{"metadata", {{"name", "p5"}}},
                {"spec", {{"nodeLabels", {{"node.kubernetes.io/instance-type", "p5.48xlarge"}}}}}};
  };
  return objects;
}

}  // namespace ncclguard::test
