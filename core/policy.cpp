#include "core/policy.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <set>
#include <unordered_map>

#include "core/contract.h"
#include "core/documents.h"
#include "core/errors.h"
#include "core/guide.h"
#include "core/json.h"
#include "core/rule.h"
#include "core/topology.h"

namespace ncclguard::core {

std::string NormalizeInstanceType(std::string_view name) {
  std::string normal(name);
  std::transform(normal.begin(), normal.end(), normal.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  constexpr std::string_view kSageMakerPrefix = "ml.";
  // "ml.p5.48xlarge", never a bare "ml.": the prefix is only one when a type follows it.
  if (normal.starts_with(kSageMakerPrefix) &&
      normal.find('.', kSageMakerPrefix.size()) != std::string::npos) {
    normal.erase(0, kSageMakerPrefix.size());
  }
  return normal;
}

std::string InstanceFamily(std::string_view instance_type) {
  const std::string normal = NormalizeInstanceType(instance_type);
  return normal.substr(0, normal.find('.'));
}

namespace {

// The catalog's entries by name, for adding many at once: one lookup each instead of a search of
// the list (a --catalog file of 100,000 types took 10 s that way).
class CatalogIndex {
 public:
  explicit CatalogIndex(std::vector<InstanceType>& types) : types_(types) {
    for (std::size_t i = 0; i < types.size(); ++i) at_.emplace(types[i].name, i);
  }
  InstanceType* Find(const std::string& name) {
    const auto found = at_.find(name);
    return found == at_.end() ? nullptr : &types_[found->second];
  }
  void Add(InstanceType type) {
    at_.emplace(type.name, types_.size());
    types_.push_back(std::move(type));
  }

 private:
  std::vector<InstanceType>& types_;
  std::unordered_map<std::string, std::size_t> at_;
};

}  // namespace

std::string CatalogSourceNote(const InstanceType& type) {
  switch (type.source) {
    case CatalogSource::Observed:
      return ", as its nodes advertise";
    case CatalogSource::Policy:
      return ", per the NcclPolicy";
    case CatalogSource::BuiltIn:
      break;
  }
  return "";
}

Policy Policy::Defaults() {
  Policy policy;
  policy.guide_base_url = std::string(kDefaultGuideBaseUrl);
  policy.socket_ifname = "^lo,docker,efa,veth";
  policy.cluster_domain = "cluster.local";
  policy.instance_types = BuiltInInstanceTypes();
  return policy;
}

const InstanceType* Policy::FindInstanceType(std::string_view name) const {
  const std::string normal = NormalizeInstanceType(name);
  auto it = std::find_if(instance_types.begin(), instance_types.end(),
                         [&](const InstanceType& t) { return t.name == normal; });
  return it == instance_types.end() ? nullptr : &*it;
}

void Policy::Learn(const std::vector<ObservedInstanceType>& observed) {
  CatalogIndex index(instance_types);
  for (const ObservedInstanceType& seen : observed) {
    std::string normal = NormalizeInstanceType(seen.name);
    if (normal.find('.') == std::string::npos || seen.gpus < 1) continue;
    InstanceType* known = index.Find(normal);
    if (known == nullptr) {
      index.Add({std::move(normal), seen.efa_devices, seen.gpus, false, CatalogSource::Observed,
                 seen.topology_levels, seen.ultra_server_nodes});
      continue;
    }
    // Where its nodes sit in the network is only ever observed.
    known->topology_levels = seen.topology_levels;
    known->ultra_server_nodes = seen.ultra_server_nodes;
    if (known->source == CatalogSource::Policy) continue;  // the admin's counts stand
    known->gpus = std::max(known->gpus, seen.gpus);
    known->efa_devices = std::max(known->efa_devices, seen.efa_devices);
  }
}

std::string_view PlacementModeName(PlacementMode mode) {
  switch (mode) {
    case PlacementMode::Required:
      return "required";
    case PlacementMode::Off:
      return "off";
    case PlacementMode::Preferred:
      break;
  }
  return "preferred";
}

std::optional<PlacementMode> ParsePlacementMode(std::string_view name) {
  if (name == "preferred") return PlacementMode::Preferred;
  if (name == "required") return PlacementMode::Required;
  if (name == "off") return PlacementMode::Off;
  return std::nullopt;
}

PlacementMode PlacementModeIn(PlacementMode policy_mode, const Json* namespace_labels) {
  if (namespace_labels == nullptr || !namespace_labels->is_object()) return policy_mode;
  const auto label = namespace_labels->find(std::string(kPlacementNamespaceLabel));
  if (label == namespace_labels->end() || !label->is_string()) return policy_mode;
  return ParsePlacementMode(label->get_ref<const std::string&>()).value_or(policy_mode);
}

std::string_view ModeName(Mode mode) { return mode == Mode::Audit ? "audit" : "enforce"; }

std::optional<Mode> ParseMode(std::string_view name) {
  if (name == "enforce") return Mode::Enforce;
  if (name == "audit") return Mode::Audit;
  return std::nullopt;
}

Mode ModeIn(const Policy& policy, const Json* namespace_labels) {
  if (namespace_labels == nullptr || !namespace_labels->is_object()) return policy.mode;
  const auto label = namespace_labels->find(std::string(kModeNamespaceLabel));
  if (label == namespace_labels->end() || !label->is_string()) return policy.mode;
  return ParseMode(label->get<std::string>()).value_or(policy.mode);
}

bool AuditPolicy::Audits(std::string_view namespace_, std::string_view own_namespace) const {
  static constexpr std::array<std::string_view, 3> kSystem{"kube-system", "kube-public",
                                                           "kube-node-lease"};
  if (namespace_.empty() || namespace_ == own_namespace) return false;
  if (std::find(kSystem.begin(), kSystem.end(), namespace_) != kSystem.end()) return false;
  if (std::find(excluded_namespaces.begin(), excluded_namespaces.end(), namespace_) !=
      excluded_namespaces.end()) {
    return false;
  }
  return namespaces.empty() ||
         std::find(namespaces.begin(), namespaces.end(), namespace_) != namespaces.end();
}

bool Policy::RuleEnabled(std::string_view rule_id) const {
  auto it = rules.find(rule_id);
  return it == rules.end() || it->second.enabled;
}

Level Policy::EffectiveLevel(std::string_view rule_id, Level rule_action) const {
  auto it = rules.find(rule_id);
  if (it == rules.end() || !it->second.level) return rule_action;
  return *it->second.level;
}

namespace {

// A mapping key as text; a list or map used as a key (`? [a]: b`) is the user's error, not a
// yaml-cpp conversion exception (found by fuzz/policy).
std::string Key(const YAML::Node& key, const std::string& where) {
  if (!key.IsScalar()) throw PolicyError(where + ": keys must be strings");
  return key.Scalar();
}

void CheckKeys(const YAML::Node& map, const std::string& where, std::set<std::string> allowed) {
  for (const auto& entry : map) {
    const std::string key = Key(entry.first, where);
    if (!allowed.contains(key)) {
      throw PolicyError(where + ": unknown field \"" + key + "\"");
    }
  }
}

template <typename T>
T Scalar(const YAML::Node& node, const std::string& where, const char* expected) {
  if (!node.IsScalar()) throw PolicyError(where + ": expected " + expected);
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    throw PolicyError(where + ": expected " + expected + ", got \"" + node.Scalar() + "\"");
  }
}

// A string of the policy: `fix` writes it into manifests and the webhook into its JSON answers,
// so it must be UTF-8 (yaml-cpp passes raw bytes through, and decodes "\N" and "\_" to the single
// bytes 0x85 and 0xA0). Json's writer is the check those answers meet: it threw on such a string
// and the webhook answered 500.
std::string Utf8String(const YAML::Node& node, const std::string& where, const char* expected) {
  std::string text = Scalar<std::string>(node, where, expected);
  if (!IsUtf8(text)) throw PolicyError(where + ": not valid UTF-8");
  return text;
}

YAML::Node RequireMap(const YAML::Node& node, const std::string& where) {
  if (!node.IsMap()) throw PolicyError(where + ": expected a mapping");
  return node;
}

void ApplyInstanceTypes(const YAML::Node& list, Policy& policy) {
  if (!list.IsSequence()) throw PolicyError("spec.instanceTypes: expected a list");
  CatalogIndex index(policy.instance_types);
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string where = "spec.instanceTypes[" + std::to_string(i) + "]";
    const YAML::Node item = RequireMap(list[i], where);
    CheckKeys(item, where, {"name", "efaDevices", "gpus", "gpudirectRdma"});
    InstanceType type;
    if (!item["name"]) throw PolicyError(where + ": name is required");
    const std::string written = Utf8String(item["name"], where + ".name", "a string");
    type.name = NormalizeInstanceType(written);
    if (type.name.empty() || type.name.find('.') == std::string::npos) {
      throw PolicyError(where + ".name: \"" + written +
                        "\" is not an instance type like p5.48xlarge");
    }
    InstanceType* existing = index.Find(type.name);
    if (existing != nullptr) type = *existing;
    type.source = CatalogSource::Policy;
    if (item["efaDevices"]) {
      type.efa_devices = Scalar<int>(item["efaDevices"], where + ".efaDevices", "an integer");
    }
    if (item["gpus"]) type.gpus = Scalar<int>(item["gpus"], where + ".gpus", "an integer");
    if (item["gpudirectRdma"]) {
      type.gpudirect_rdma =
          Scalar<bool>(item["gpudirectRdma"], where + ".gpudirectRdma", "true or false");
    }
    if (type.efa_devices < 0 || type.efa_devices > 64) {
      throw PolicyError(where + ".efaDevices: must be between 0 and 64");
    }
    if (type.gpus < 1 || type.gpus > 64)
      throw PolicyError(where + ".gpus: must be between 1 and 64");
    if (existing != nullptr) {
      *existing = std::move(type);
    } else {
      index.Add(std::move(type));
    }
  }
}

std::vector<std::string> NamespaceList(const YAML::Node& list, const std::string& where) {
  if (!list.IsSequence()) throw PolicyError(where + ": expected a list of namespace names");
  if (list.size() > 1024) throw PolicyError(where + ": at most 1024 namespaces");
  std::vector<std::string> names;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    std::string name = Utf8String(list[i], at, "a namespace name");
    if (name.empty() || name.size() > 63) throw PolicyError(at + ": not a namespace name");
    names.push_back(std::move(name));
  }
  return names;
}

void ApplyAudit(const YAML::Node& map, AuditPolicy& audit) {
  RequireMap(map, "spec.audit");
  CheckKeys(map, "spec.audit", {"namespaces", "excludedNamespaces", "intervalSeconds"});
  if (map["namespaces"])
    audit.namespaces = NamespaceList(map["namespaces"], "spec.audit.namespaces");
  if (map["excludedNamespaces"]) {
    audit.excluded_namespaces =
        NamespaceList(map["excludedNamespaces"], "spec.audit.excludedNamespaces");
  }
  if (map["intervalSeconds"]) {
    audit.interval_seconds =
        Scalar<int>(map["intervalSeconds"], "spec.audit.intervalSeconds", "an integer");
    if (audit.interval_seconds < 60 || audit.interval_seconds > 86400) {
      throw PolicyError("spec.audit.intervalSeconds: must be between 60 and 86400");
    }
  }
}

void ApplyRules(const YAML::Node& map, Policy& policy) {
  RequireMap(map, "spec.rules");
  for (const auto& entry : map) {
    const std::string id = Key(entry.first, "spec.rules");
    const std::string where = "spec.rules." + id;
    const Rule* rule = RuleRegistry::Find(id);
    if (rule == nullptr)
      throw PolicyError(where + ": no rule with this id (see `ncclguard explain --all`)");
    const YAML::Node item = RequireMap(entry.second, where);
    CheckKeys(item, where, {"enabled", "level"});
    RuleOverride override_;
    if (item["enabled"])
      override_.enabled = Scalar<bool>(item["enabled"], where + ".enabled", "true or false");
    if (item["level"]) {
      auto name = Utf8String(item["level"], where + ".level", "fix, warn or deny");
      auto level = ParseLevel(name);
      if (!level)
        throw PolicyError(where + ".level: \"" + name + "\" is not one of fix, warn, deny");
      if (*level == Level::Fix && rule->Info().action != Level::Fix) {
        throw PolicyError(where + ".level: the rule has no fix; use warn or deny");
      }
      override_.level = level;
    }
    policy.rules[id] = override_;
  }
}

}  // namespace

Policy ParsePolicy(std::string_view yaml_text, const Policy& base) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    throw PolicyError(std::string("not valid YAML: ") + e.what());
  }
  if (root.IsNull()) {
    // Empty, comments only or null: no settings. Or text on which yaml-cpp stops advancing: one
    // that starts with "," reads as endless empty documents, and Load returns the first. The
    // manifest reader tells them apart.
    try {
      static_cast<void>(ParseDocuments(yaml_text));
    } catch (const InputError& e) {
      throw PolicyError(e.what());
    }
    return base;
  }
  RequireMap(root, "policy");
  YAML::Node spec = root;
  if (root["kind"] || root["apiVersion"] || root["spec"]) {
    CheckKeys(root, "policy", {"apiVersion", "kind", "metadata", "spec"});
    if (root["kind"] && Utf8String(root["kind"], "kind", "a string") != "NcclPolicy") {
      throw PolicyError("kind: expected NcclPolicy");
    }
    spec = root["spec"] ? root["spec"] : YAML::Node(YAML::NodeType::Map);
    if (spec.IsNull()) return base;
    RequireMap(spec, "spec");
  }
  CheckKeys(
      spec, "spec",
      {"guideBaseURL", "socketIfname", "clusterDomain", "defaultInstanceType", "instanceTypes",
       "rules", "gate", "rendezvousPort", "rasReads", "imagePin", "placement", "mode", "audit"});
  Policy policy = base;
  try {
    if (spec["guideBaseURL"]) {
      policy.guide_base_url = Utf8String(spec["guideBaseURL"], "spec.guideBaseURL", "a URL");
      if (policy.guide_base_url.empty()) throw PolicyError("spec.guideBaseURL: must not be empty");
    }
    if (spec["socketIfname"]) {
      policy.socket_ifname = Utf8String(spec["socketIfname"], "spec.socketIfname", "a string");
    }
    if (spec["clusterDomain"]) {
      policy.cluster_domain = Utf8String(spec["clusterDomain"], "spec.clusterDomain", "a string");
    }
    if (spec["instanceTypes"]) ApplyInstanceTypes(spec["instanceTypes"], policy);
    if (spec["defaultInstanceType"]) {
      auto name = Utf8String(spec["defaultInstanceType"], "spec.defaultInstanceType", "a string");
      policy.default_instance_type = name.empty() ? std::nullopt : std::optional<std::string>(name);
    }
    if (spec["rules"]) ApplyRules(spec["rules"], policy);
    if (spec["mode"]) {
      const std::string mode = Utf8String(spec["mode"], "spec.mode", "enforce or audit");
      const std::optional<Mode> parsed = ParseMode(mode);
      if (!parsed) throw PolicyError("spec.mode: expected enforce or audit, got \"" + mode + "\"");
      policy.mode = *parsed;
    }
    if (spec["audit"]) ApplyAudit(spec["audit"], policy.audit);
    if (spec["gate"]) {
      const YAML::Node gate = RequireMap(spec["gate"], "spec.gate");
      CheckKeys(gate, "spec.gate",
                {"enabled", "countUnvalidatedNodes", "deferToKueue", "admitWhenReady",
                 "holdTimeoutSeconds", "retryAfterSeconds", "hyperPod"});
      if (gate["hyperPod"]) {
        const YAML::Node hyperpod = RequireMap(gate["hyperPod"], "spec.gate.hyperPod");
        CheckKeys(hyperpod, "spec.gate.hyperPod", {"nodeHealth", "deepHealthCheck"});
        for (auto [key, field] :
             {std::pair{"nodeHealth", &policy.gate.hyperpod.node_health},
              std::pair{"deepHealthCheck", &policy.gate.hyperpod.deep_health_check}}) {
          if (hyperpod[key]) {
            *field = Scalar<bool>(hyperpod[key], std::string("spec.gate.hyperPod.") + key,
                                  "true or false");
          }
        }
      }
      if (gate["enabled"])
        policy.gate.enabled = Scalar<bool>(gate["enabled"], "spec.gate.enabled", "true or false");
      if (gate["countUnvalidatedNodes"]) {
        policy.gate.count_unvalidated_nodes = Scalar<bool>(
            gate["countUnvalidatedNodes"], "spec.gate.countUnvalidatedNodes", "true or false");
      }
      if (gate["deferToKueue"]) {
        policy.gate.defer_to_kueue =
            Scalar<bool>(gate["deferToKueue"], "spec.gate.deferToKueue", "true or false");
      }
      if (gate["admitWhenReady"]) {
        policy.gate.admit_when_ready =
            Scalar<bool>(gate["admitWhenReady"], "spec.gate.admitWhenReady", "true or false");
      }
      for (auto [key, field] : {std::pair{"holdTimeoutSeconds", &policy.gate.hold_timeout_seconds},
                                std::pair{"retryAfterSeconds", &policy.gate.retry_after_seconds}}) {
        if (!gate[key]) continue;
        const std::string path = std::string("spec.gate.") + key;
        *field = Scalar<int>(gate[key], path, "a number of seconds");
        if (*field < 1) throw PolicyError(path + ": must be at least 1");
      }
    }
    if (spec["rendezvousPort"]) {
      policy.rendezvous_port =
          Scalar<int>(spec["rendezvousPort"], "spec.rendezvousPort", "a port number");
      if (policy.rendezvous_port < 1 || policy.rendezvous_port > 65535) {
        throw PolicyError("spec.rendezvousPort: must be between 1 and 65535");
      }
    }
    if (spec["rasReads"]) {
      policy.ras_reads = Scalar<bool>(spec["rasReads"], "spec.rasReads", "true or false");
    }
    if (spec["imagePin"]) {
      const std::string pin = Utf8String(spec["imagePin"], "spec.imagePin", "pin, warn or off");
      const std::optional<PinMode> parsed = ParsePinMode(pin);
      if (!parsed)
        throw PolicyError("spec.imagePin: expected pin, warn or off, got \"" + pin + "\"");
      policy.image_pin = *parsed;
    }
    if (spec["placement"]) {
      const std::string placement =
          Utf8String(spec["placement"], "spec.placement", "preferred, required or off");
      const std::optional<PlacementMode> parsed = ParsePlacementMode(placement);
      if (!parsed) {
        throw PolicyError("spec.placement: expected preferred, required or off, got \"" +
                          placement + "\"");
      }
      policy.placement = *parsed;
    }
  } catch (const YAML::Exception& e) {
    throw PolicyError(std::string("reading policy: ") + e.what());
  }
  return policy;
}

namespace {

constexpr std::string_view kObservedField = "observedInstanceTypes";

int ObservedCount(const Json& entry, const char* key, const std::string& where, int max) {
  const auto value = entry.find(key);
  if (value == entry.end()) return 0;
  if (!value->is_number_integer()) throw PolicyError(where + "." + key + ": expected an integer");
  const auto count = value->get<std::int64_t>();
  if (count < 0 || count > max) {
    throw PolicyError(where + "." + key + ": must be between 0 and " + std::to_string(max));
  }
  return static_cast<int>(count);
}

std::string ObservedString(const Json& entry, const char* key, const std::string& where) {
  const auto value = entry.find(key);
  if (value == entry.end()) return "";
  if (!value->is_string()) throw PolicyError(where + "." + key + ": expected a string");
  return value->get<std::string>();
}

// The list inside an NcclPolicy object, its status, or the list itself.
const Json* ObservedList(const Json& value, std::string& where) {
  if (value.is_array()) return &value;
  if (!value.is_object()) throw PolicyError("observed catalog: expected an NcclPolicy or a list");
  const Json* status = &value;
  where = "";
  if (const auto found = value.find("status"); found != value.end()) {
    if (found->is_null()) return nullptr;
    if (!found->is_object()) throw PolicyError("status: expected an object");
    status = &*found;
    where = "status.";
  } else if (value.contains("kind") || value.contains("spec")) {
    return nullptr;  // an NcclPolicy without a status yet
  }
  const auto list = status->find(kObservedField);
  where += kObservedField;
  if (list == status->end() || list->is_null()) return nullptr;
  if (!list->is_array()) throw PolicyError(where + ": expected a list");
  return &*list;
}

}  // namespace

std::vector<ObservedInstanceType> ParseObservedCatalog(const Json& value) {
  std::vector<ObservedInstanceType> observed;
  if (value.is_null()) return observed;
  std::string where(kObservedField);
  const Json* list = ObservedList(value, where);
  if (list == nullptr) return observed;
  observed.reserve(list->size());
  for (std::size_t i = 0; i < list->size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const Json& entry = (*list)[i];
    if (!entry.is_object()) throw PolicyError(at + ": expected an object");
    ObservedInstanceType type;
    type.name = ObservedString(entry, "name", at);
    if (NormalizeInstanceType(type.name).find('.') == std::string::npos) {
      throw PolicyError(at + ".name: \"" + type.name +
                        "\" is not an instance type like p5.48xlarge");
    }
    type.gpus = ObservedCount(entry, "gpus", at, 64);
    type.efa_devices = ObservedCount(entry, "efaDevices", at, 64);
    type.nodes = ObservedCount(entry, "nodes", at, 1'000'000);
    type.observed_time = ObservedString(entry, "observedTime", at);
    type.nodes_missing_topology_level =
        ObservedCount(entry, "nodesMissingTopologyLevel", at, 1'000'000);
    if (const auto levels = entry.find("topologyLevels"); levels != entry.end()) {
      if (!levels->is_array()) throw PolicyError(at + ".topologyLevels: expected a list");
      if (levels->size() > static_cast<std::size_t>(kMaxNetworkLayer)) {
        throw PolicyError(at + ".topologyLevels: at most " + std::to_string(kMaxNetworkLayer) +
                          " levels");
      }
      for (const Json& level : *levels) {
        if (!level.is_string() || !NetworkLayerOf(level.get<std::string>())) {
          throw PolicyError(at + ".topologyLevels: " + level.dump() + " is not a " +
                            std::string(kNetworkNodeLayerPrefix) + "N label");
        }
        type.topology_levels.push_back(level.get<std::string>());
      }
    }
    if (const auto ultra = entry.find("ultraServer"); ultra != entry.end()) {
      if (!ultra->is_boolean()) throw PolicyError(at + ".ultraServer: expected true or false");
      type.ultra_server = ultra->get<bool>();
    }
    type.ultra_server_nodes = ObservedCount(entry, "ultraServerNodes", at, 1'000'000);
    if (const auto names = entry.find("nodeNames"); names != entry.end()) {
      if (!names->is_array()) throw PolicyError(at + ".nodeNames: expected a list");
      for (const Json& name : *names) {
        if (!name.is_string()) throw PolicyError(at + ".nodeNames: expected strings");
        if (type.node_names.size() < kMaxObservedNodeNames) {
          type.node_names.push_back(name.get<std::string>());
        }
      }
    }
    observed.push_back(std::move(type));
  }
  return observed;
}

Json ObservedCatalogJson(const std::vector<ObservedInstanceType>& observed) {
  Json list = Json::array();
  for (const ObservedInstanceType& type : observed) {
    Json entry{{"name", type.name},
               {"gpus", type.gpus},
               {"efaDevices", type.efa_devices},
               {"nodes", type.nodes},
               {"nodeNames", type.node_names}};
    if (!type.observed_time.empty()) entry["observedTime"] = type.observed_time;
    if (!type.topology_levels.empty()) entry["topologyLevels"] = type.topology_levels;
    if (type.nodes_missing_topology_level > 0) {
      entry["nodesMissingTopologyLevel"] = type.nodes_missing_topology_level;
    }
    if (type.ultra_server) entry["ultraServer"] = true;
    if (type.ultra_server_nodes > 0) entry["ultraServerNodes"] = type.ultra_server_nodes;
    list.push_back(std::move(entry));
  }
  return list;
}

}  // namespace ncclguard::core
