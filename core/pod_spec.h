#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "core/policy.h"
#include "core/workload.h"

namespace ncclguard::core {

inline constexpr std::string_view kGpuResource = "nvidia.com/gpu";
inline constexpr std::string_view kEfaResource = "vpc.amazonaws.com/efa";
inline constexpr std::string_view kInstanceTypeLabel = "node.kubernetes.io/instance-type";

struct EnvVar {
  std::size_t index = 0;
  std::optional<std::string> value;  // nullopt when set through valueFrom
};

// One entry of spec.containers with the facts the rules read, validated once.
struct Container {
  JsonPointer at;
  const Json* spec = nullptr;
  std::string name;
  std::int64_t gpus = 0;            // nvidia.com/gpu (limits, else requests)
  std::optional<std::int64_t> efa;  // vpc.amazonaws.com/efa when requested
  bool has_env_from = false;

  std::optional<EnvVar> Env(std::string_view name) const;
  std::optional<std::string> Image() const;
  bool IsGpu() const { return gpus > 0; }
};

// Where the template's instance type came from.
enum class InstanceTypeSource { NodeSelector, NodeAffinity, PolicyDefault, Unknown };

// The facts about one pod template that the pod-level rules share.
struct TemplateFacts {
  const PodTemplate* tmpl = nullptr;
  JsonPointer pod_spec;
  const Json* spec = nullptr;
  std::vector<Container> containers;
  std::optional<std::string> instance_type_name;
  InstanceTypeSource instance_type_source = InstanceTypeSource::Unknown;
  const InstanceType* instance_type = nullptr;  // catalog entry, when known
  bool host_network = false;

  bool HasGpuContainer() const;
  bool RequestsEfa() const;
  // A pod template on an EFA instance type, or one that requests vpc.amazonaws.com/efa.
  bool IsEfaPod() const;
  // A container that requests EFA devices. The fix phase adds the request first
  // (efa-resources-missing), so the other EFA fixes key on it.
  bool IsEfaContainer(const Container& c) const;
  // The EFA count a container with `gpus` GPUs should request on this instance type.
  std::optional<std::int64_t> ExpectedEfa(const Container& c) const;
};

// Which read of a template this is. The first checks every field the rules may read (the image,
// each env entry) and throws InputError on a wrong type. A read again after ncclguard's own fix
// takes only the facts: a fix adds well-typed fields and nothing else, so what the first read
// checked still holds (the engine reads a template again after each fix that patched it).
enum class TemplateRead { First, AfterFix };

// Reads the template's containers and instance type. Throws InputError on wrong types.
TemplateFacts ReadTemplateFacts(const Json& object, const PodTemplate& tmpl, const Policy& policy,
                                TemplateRead read = TemplateRead::First);

// Kubernetes quantity as a whole count ("8", 8, "1k"); throws InputError otherwise.
std::int64_t ParseCount(const Json& value, const JsonPointer& at);

}  // namespace ncclguard::core
