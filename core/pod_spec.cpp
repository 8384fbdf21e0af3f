#include "core/pod_spec.h"

#include <algorithm>

#include "core/errors.h"
#include "core/json_access.h"

namespace ncclguard::core {

namespace {

// Device counts are small; bounding them keeps later arithmetic (EFA per GPU) exact.
constexpr std::int64_t kMaxCount = 1'000'000;

// The count ParseCount reads, or nullopt where it throws: no pointer is built on this path.
std::optional<std::int64_t> WholeCount(const Json& value) {
  if (value.is_number_integer()) {
    const auto count = value.get<std::int64_t>();
    if (count < 0 || count > kMaxCount) return std::nullopt;
    return count;
  }
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (d >= 0 && d <= static_cast<double>(kMaxCount) &&
        d == static_cast<double>(static_cast<std::int64_t>(d))) {
      return static_cast<std::int64_t>(d);
    }
  }
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    std::size_t digits = 0;
    std::int64_t count = 0;
    while (digits < text.size() && digits < 10 && text[digits] >= '0' && text[digits] <= '9') {
      count = count * 10 + (text[digits] - '0');
      ++digits;
    }
    const std::string_view suffix = std::string_view(text).substr(digits);
    std::int64_t scale = 0;
    if (suffix.empty()) scale = 1;
    if (suffix == "k") scale = 1000;
    if (suffix == "Ki") scale = 1024;
    if (digits > 0 && scale > 0 && count * scale <= kMaxCount) return count * scale;
  }
  return std::nullopt;
}

}  // namespace

std::int64_t ParseCount(const Json& value, const JsonPointer& at) {
  if (const auto count = WholeCount(value)) return *count;
  if (value.is_number_integer()) {
    if (value.get<std::int64_t>() < 0) throw InputError(at.to_string() + ": must not be negative");
    throw InputError(at.to_string() + ": " + value.dump() + " is out of range");
  }
  throw InputError(at.to_string() + ": expected a whole-number quantity, got " + value.dump());
}

std::optional<EnvVar> Container::Env(std::string_view wanted) const {
  const auto it = spec->find("env");
  if (it == spec->end() || !it->is_array()) return std::nullopt;
  std::optional<EnvVar> found;
  // Kubernetes lets the last duplicate win.
  for (std::size_t i = 0; i < it->size(); ++i) {
    const Json& var = (*it)[i];
    // ReadTemplateFacts checked that every entry is an object with a string name; compared in
    // place, not copied out (Env runs for each variable each rule asks about).
    const auto var_name = var.find("name");
    if (var_name == var.end() || !var_name->is_string() ||
        var_name->get_ref<const std::string&>() != wanted) {
      continue;
    }
    EnvVar env{i, std::nullopt};
    const auto value = var.find("value");
    if (value != var.end() && value->is_string()) env.value = value->get<std::string>();
    if (value == var.end() && !var.contains("valueFrom")) env.value = "";
    found = env;
  }
  return found;
}

std::optional<std::string> Container::Image() const {
  const auto it = spec->find("image");
  if (it == spec->end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

namespace {

// The pointers that name a field in an error are built only when there is one to report.
std::optional<std::int64_t> ResourceCount(const Json& container, const JsonPointer& at,
                                          std::string_view resource) {
  const Json* resources = ChildObject(container, "resources", at);
  if (resources == nullptr) return std::nullopt;
  for (const char* kind : {"limits", "requests"}) {
    const auto map = resources->find(kind);
    if (map == resources->end() || map->is_null()) continue;
    if (!map->is_object()) ChildObject(*resources, kind, at / "resources");  // throws
    const auto it = map->find(resource);
    if (it != map->end() && !it->is_null()) {
      if (const auto count = WholeCount(*it)) return *count;
      return ParseCount(*it, at / "resources" / kind / std::string(resource));  // throws
    }
  }
  return std::nullopt;
}

void ValidateEnv(const Json& container, const JsonPointer& at) {
  const Json* env = ChildArray(container, "env", at);
  if (env == nullptr) return;
  for (std::size_t i = 0; i < env->size(); ++i) {
    const Json& var = (*env)[i];
    if (!var.is_object()) throw InputError((at / "env" / i).to_string() + ": expected an object");
    const auto name = var.find("name");
    if (name == var.end() || !name->is_string()) {
      throw InputError((at / "env" / i / "name").to_string() + ": an env entry needs a name");
    }
    const auto value = var.find("value");
    if (value != var.end() && !value->is_string() && !value->is_null()) {
      ChildString(var, "value", at / "env" / i);
    }
  }
}

std::optional<std::string> FromNodeAffinity(const Json& object, const JsonPointer& pod_spec) {
  const JsonPointer terms_at = pod_spec / "affinity" / "nodeAffinity" /
                               "requiredDuringSchedulingIgnoredDuringExecution" /
                               "nodeSelectorTerms";
  const Json* terms = OptionalArray(object, terms_at);
  if (terms == nullptr) return std::nullopt;
  std::optional<std::string> found;
  // Terms are ORed: the instance type is known only if every term pins the same single value.
  for (std::size_t t = 0; t < terms->size(); ++t) {
    const Json* expressions = OptionalArray(object, terms_at / t / "matchExpressions");
    std::optional<std::string> in_term;
    if (expressions != nullptr) {
      for (std::size_t e = 0; e < expressions->size(); ++e) {
        const JsonPointer at = terms_at / t / "matchExpressions" / e;
        if (OptionalString(object, at / "key").value_or("") != kInstanceTypeLabel) continue;
        if (OptionalString(object, at / "operator").value_or("") != "In") continue;
        const Json* values = OptionalArray(object, at / "values");
        if (values != nullptr && values->size() == 1 && (*values)[0].is_string()) {
          in_term = (*values)[0].get<std::string>();
        }
      }
    }
    if (!in_term || (found && *found != *in_term)) return std::nullopt;
    found = in_term;
  }
  return found;
}

}  // namespace

TemplateFacts ReadTemplateFacts(const Json& object, const PodTemplate& tmpl, const Policy& policy,
                                TemplateRead read) {
  TemplateFacts facts;
  facts.tmpl = &tmpl;
  facts.pod_spec = tmpl.pod_spec;
  facts.spec = OptionalObject(object, tmpl.pod_spec);
  if (facts.spec == nullptr) throw InputError(tmpl.pod_spec.to_string() + ": pod spec is missing");
  facts.host_network = ChildBool(*facts.spec, "hostNetwork", tmpl.pod_spec).value_or(false);

  const JsonPointer containers_at = tmpl.pod_spec / "containers";
  if (const Json* containers = ChildArray(*facts.spec, "containers", tmpl.pod_spec)) {
    facts.containers.reserve(containers->size());
    for (std::size_t i = 0; i < containers->size(); ++i) {
      Container c;
      c.at = containers_at / i;
      c.spec = &(*containers)[i];
      if (!c.spec->is_object()) throw InputError(c.at.to_string() + ": expected an object");
      c.name = ChildString(*c.spec, "name", c.at).value_or("");
      c.gpus = ResourceCount(*c.spec, c.at, kGpuResource).value_or(0);
      c.efa = ResourceCount(*c.spec, c.at, kEfaResource);
      c.has_env_from = ChildArray(*c.spec, "envFrom", c.at) != nullptr;
      if (read == TemplateRead::First) {
        ChildString(*c.spec, "image", c.at);
        ValidateEnv(*c.spec, c.at);
      }
      facts.containers.push_back(std::move(c));
    }
  }

  const Json* selector = ChildObject(*facts.spec, "nodeSelector", tmpl.pod_spec);
  if (selector != nullptr && selector->contains(kInstanceTypeLabel)) {
    facts.instance_type_name =
        ChildString(*selector, kInstanceTypeLabel, tmpl.pod_spec / "nodeSelector");
    facts.instance_type_source = InstanceTypeSource::NodeSelector;
  } else if (auto from_affinity = facts.spec->contains("affinity")
                                      ? FromNodeAffinity(object, tmpl.pod_spec)
                                      : std::nullopt) {
    facts.instance_type_name = std::move(from_affinity);
    facts.instance_type_source = InstanceTypeSource::NodeAffinity;
  } else if (policy.default_instance_type) {
    facts.instance_type_name = policy.default_instance_type;
    facts.instance_type_source = InstanceTypeSource::PolicyDefault;
  }
  if (facts.instance_type_name)
    facts.instance_type = policy.FindInstanceType(*facts.instance_type_name);
  return facts;
}

bool TemplateFacts::HasGpuContainer() const {
  return std::any_of(containers.begin(), containers.end(),
                     [](const Container& c) { return c.IsGpu(); });
}

bool TemplateFacts::RequestsEfa() const {
  return std::any_of(containers.begin(), containers.end(),
                     [](const Container& c) { return c.efa.value_or(0) > 0; });
}

bool TemplateFacts::IsEfaPod() const {
  return (instance_type != nullptr && instance_type->efa_devices > 0) || RequestsEfa();
}

bool TemplateFacts::IsEfaContainer(const Container& c) const { return c.efa.value_or(0) > 0; }

std::optional<std::int64_t> TemplateFacts::ExpectedEfa(const Container& c) const {
  if (instance_type == nullptr || !c.IsGpu() || instance_type->gpus <= 0) return std::nullopt;
  // EFA devices are shared out in proportion to GPUs; a partial share rounds up so a pod with
  // fewer GPUs than a PCIe switch holds still gets the NIC beside them.
  const std::int64_t numerator = instance_type->efa_devices * c.gpus;
  return (numerator + instance_type->gpus - 1) / instance_type->gpus;
}

}  // namespace ncclguard::core
