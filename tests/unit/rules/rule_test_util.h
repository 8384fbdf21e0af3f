#pragma once

// Small helpers shared by the per-rule tests: build the shared manifests, edit them one field at a
// time, build the expected RFC 6902 operations, and check findings with readable failure messages.

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>

#include "core/engine.h"
#include "core/finding.h"
#include "core/json.h"
#include "core/policy.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {

inline constexpr const char* kInstanceTypeKey = "node.kubernetes.io/instance-type";
inline constexpr const char* kEfaKey = "vpc.amazonaws.com/efa";
inline constexpr const char* kGpuKey = "nvidia.com/gpu";

// Container `index` of a bare Pod.
inline core::Json& ContainerOf(core::Json& pod, std::size_t index = 0) {
  return pod.at("spec").at("containers").at(index);
}

// Sets env `name` on a container; an existing entry keeps its index.
inline void SetEnv(core::Json& container, const std::string& name, const std::string& value) {
  core::Json& env = container["env"];
  if (!env.is_array()) env = core::Json::array();
  for (core::Json& var : env) {
    if (var.value("name", "") == name) {
      var = core::Json{{"name", name}, {"value", value}};
      return;
    }
  }
  env.push_back(core::Json{{"name", name}, {"value", value}});
}

inline void RemoveEnv(core::Json& container, const std::string& name) {
  core::Json kept = core::Json::array();
  for (const core::Json& var : container["env"]) {
    if (var.value("name", "") != name) kept.push_back(var);
  }
  container["env"] = kept;
}

inline void SetInstanceType(core::Json& pod, const std::string& type) {
  pod["spec"]["nodeSelector"][kInstanceTypeKey] = type;
}

// Sets requests and limits of `resource` on a container.
inline void SetResource(core::Json& container, const char* resource, const core::Json& value) {
  container["resources"]["requests"][resource] = value;
  container["resources"]["limits"][resource] = value;
}

inline void RemoveResource(core::Json& container, const char* resource) {
  container["resources"]["requests"].erase(resource);
  container["resources"]["limits"].erase(resource);
}

// The compliant pod with env `name` set on its GPU container.
inline core::Json PodWithEnv(const std::string& name, const std::string& value) {
  core::Json pod = CompliantPod();
  SetEnv(ContainerOf(pod), name, value);
  return pod;
}

// Evaluates PodWithEnv(name, value).
inline core::Evaluation CheckPodEnv(const std::string& name, const std::string& value,
                                    const core::Policy& policy = core::Policy::Defaults()) {
  return Check(PodWithEnv(name, value), policy);
}

// Appends a CPU container "sidecar" (busybox, no resources) to a bare Pod and returns it, for
// tests that GPU and EFA rules leave it alone.
inline core::Json& AddCpuSidecar(core::Json& pod) {
  core::Json& containers = pod["spec"]["containers"];
  containers.push_back(core::Json{{"name", "sidecar"}, {"image", "busybox:1.36"}});
  return containers.back();
}

// A container `name` running train:1.0 with a limit of 8 GPUs.
inline core::Json TrainContainer(const std::string& name) {
  core::Json container = {{"name", name}, {"image", "train:1.0"}};
  container["resources"]["limits"][kGpuKey] = 8;
  return container;
}

// A replica spec of a Kubeflow job: `replicas` pods of `pod_spec`.
inline core::Json ReplicaSpec(int replicas, const core::Json& pod_spec) {
  return core::Json{{"replicas", replicas}, {"template", {{"spec", pod_spec}}}};
}

// A PyTorchJob "llama" in namespace ml: one Master and `worker_replicas` Workers, each pod one
// TrainContainer "pytorch", with a nodeSelector when `instance_type` is given.
inline core::Json PyTorchJob(int worker_replicas,
                             const std::optional<std::string>& instance_type = std::nullopt) {
  core::Json pod_spec = core::Json::object();
  if (instance_type) pod_spec["nodeSelector"][kInstanceTypeKey] = *instance_type;
  pod_spec["containers"] = core::Json::array({TrainContainer("pytorch")});
  core::Json job = {{"apiVersion", "kubeflow.org/v1"},
                    {"kind", "PyTorchJob"},
                    {"metadata", {{"name", "llama"}, {"namespace", "ml"}}}};
  job["spec"]["pytorchReplicaSpecs"]["Master"] = ReplicaSpec(1, pod_spec);
  job["spec"]["pytorchReplicaSpecs"]["Worker"] = ReplicaSpec(worker_replicas, pod_spec);
  return job;
}

// An MPIJob "nccl-tests" in namespace ml with 8 slots per worker: one Launcher, a CPU container
// "launcher" on `launcher_image`, and 2 Workers, each one TrainContainer "worker".
inline core::Json MpiJob(const std::string& launcher_image = "train:1.0") {
  const core::Json launcher = {{"name", "launcher"}, {"image", launcher_image}};
  core::Json job = {{"apiVersion", "kubeflow.org/v2beta1"},
                    {"kind", "MPIJob"},
                    {"metadata", {{"name", "nccl-tests"}, {"namespace", "ml"}}}};
  job["spec"]["slotsPerWorker"] = 8;
  job["spec"]["mpiReplicaSpecs"]["Launcher"] =
      ReplicaSpec(1, {{"containers", core::Json::array({launcher})}});
  job["spec"]["mpiReplicaSpecs"]["Worker"] =
      ReplicaSpec(2, {{"containers", core::Json::array({TrainContainer("worker")})}});
  return job;
}

// A required nodeAffinity with the given nodeSelectorTerms (YAML list items, indented 6).
inline core::Json RequiredNodeAffinity(const std::string& yaml_terms) {
  return Yaml(
      "nodeAffinity:\n  requiredDuringSchedulingIgnoredDuringExecution:\n"
      "    nodeSelectorTerms:\n" +
      yaml_terms);
}

// The RFC 6902 operation the fix rules emit.
inline core::Json AddOp(const std::string& path, const core::Json& value) {
  return core::Json{{"op", "add"}, {"path", path}, {"value", value}};
}

// Findings and patch of an evaluation, for failure messages.
inline std::string Dump(const core::Evaluation& evaluation) {
  std::string out = "findings:\n";
  for (const core::Finding& f : evaluation.findings) {
    out += "  " + f.rule + " [" + std::string(core::LevelName(f.level)) + "] " + f.path + ": " +
           f.message + "\n";
  }
  return out + "patch: " + evaluation.patch.dump() + "\n";
}

inline ::testing::AssertionResult Mentions(const std::string& text, std::string_view part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not mention \"" << part << "\"";
}

// The finding links to the guide section `slug` (docs/rules.md).
inline ::testing::AssertionResult LinksTo(const core::Finding& finding, std::string_view slug) {
  const std::string suffix = "#" + std::string(slug);
  if (finding.guide.size() >= suffix.size() && finding.guide.ends_with(suffix)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "guide link \"" << finding.guide << "\" does not end with \"" << suffix << "\"";
}

// The patch a second evaluation of the fixed object produces: empty when the fix is idempotent.
inline core::Json RepatchOf(const core::Evaluation& evaluation,
                            const core::Policy& policy = core::Policy::Defaults()) {
  return Check(evaluation.fixed, policy).patch;
}

}  // namespace ncclguard::test
