#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/finding.h"
#include "core/hyperpod.h"
#include "core/image_pin.h"
#include "core/json.h"

namespace ncclguard::core {

// An instance type as the catalog knows it: lower case, without the "ml." prefix SageMaker
// HyperPod labels its nodes with ("ml.p5.48xlarge" and "P5.48xlarge" are "p5.48xlarge"). Every
// reader of an instance type looks it up by this name; findings keep the name as written.
std::string NormalizeInstanceType(std::string_view name);

// "p5" for "p5.48xlarge" (and "ml.p5.48xlarge"): replicas of one job must not mix families.
std::string InstanceFamily(std::string_view instance_type);

// Where a catalog entry's counts come from (docs/operator.md, "Instance type catalog").
enum class CatalogSource {
  BuiltIn,   // BuiltInInstanceTypes(), from AWS's documentation (docs/instance-types.md)
  Observed,  // learned from the nodes' capacity (NcclPolicy status.observedInstanceTypes)
  Policy,    // the NcclPolicy's spec.instanceTypes: the admin's word, above the others
};

struct InstanceType {
  std::string name;  // normalised, e.g. "p5.48xlarge"
  int efa_devices = 0;
  int gpus = 0;
  bool gpudirect_rdma = false;
  CatalogSource source = CatalogSource::BuiltIn;
  // What its nodes were seen to carry (Policy::Learn, ObservedInstanceType): the
  // network-node-layer labels, the farthest first, and the most nodes under one UltraServer.
  std::vector<std::string> topology_levels{};
  int ultra_server_nodes = 0;
};

// Where a message's counts come from, for any but the built-in catalog: ", as its nodes
// advertise" or ", per the NcclPolicy"; "" for a built-in entry.
std::string CatalogSourceNote(const InstanceType& type);

// The types AWS documents for NCCL training over EFA, sorted by name (core/instance_catalog.cpp).
std::vector<InstanceType> BuiltInInstanceTypes();

// What the controller saw of one instance type on the cluster's nodes: the most GPUs and EFA
// devices any of its nodes advertises in its capacity (a node that advertises fewer is that
// node's problem, the probe's efa-device-count finding, and never lowers the type's count).
struct ObservedInstanceType {
  std::string name;  // the label's value as the nodes carry it ("ml.p5.48xlarge")
  int gpus = 0;
  int efa_devices = 0;
  int nodes = 0;                        // nodes of the type seen
  std::vector<std::string> node_names;  // the first kMaxObservedNodeNames of them, by name
  std::string observed_time;            // RFC 3339: when these counts were first seen
  // The network-node-layer labels its nodes carry (core/topology.h), the farthest first: the last
  // is the deepest level, the closest block. At most kMaxNetworkLayer.
  std::vector<std::string> topology_levels;
  // Nodes of the type that lack one of topology_levels (Kueue's topology-aware scheduling leaves
  // such a node out of a Topology's capacity).
  int nodes_missing_topology_level = 0;
  bool ultra_server = false;   // a node of the type carries topology.k8s.aws/ultraserver-id
  int ultra_server_nodes = 0;  // the most nodes of the type seen under one UltraServer id
};
inline constexpr std::size_t kMaxObservedNodeNames = 10;

// What the webhook asks the schedulers for so that a job's pods land in one network block
// (core/placement_request.h): a preferred request (the default), a required one, or none. The
// NcclPolicy's spec.placement; a namespace's ncclguard.io/placement label overrides it.
enum class PlacementMode { Preferred, Required, Off };
std::string_view PlacementModeName(PlacementMode mode);  // "preferred", "required", "off"
std::optional<PlacementMode> ParsePlacementMode(std::string_view name);
// The mode in force in a namespace whose labels are `namespace_labels` (null or not an object:
// none): its ncclguard.io/placement label when that names a mode, else `policy_mode`.
PlacementMode PlacementModeIn(PlacementMode policy_mode, const Json* namespace_labels);

// What the admission webhook and the gate do with what the rules find (docs/operator.md, "Audit
// mode"): enforce fixes, denies and holds; audit changes, denies and holds nothing, and says
// what it would have done (admission warnings, PolicyReports, the job's conditions).
enum class Mode { Enforce, Audit };

std::string_view ModeName(Mode mode);
std::optional<Mode> ParseMode(std::string_view name);

struct RuleOverride {
  bool enabled = true;
  std::optional<Level> level;
};

struct GatePolicy {
  bool enabled = true;
  // Let nodes without a NodeValidation count (clusters where no probe runs).
  bool count_unvalidated_nodes = false;
  // A job labelled kueue.x-k8s.io/queue-name is left to Kueue: the webhook does not gate it, the
  // AdmissionCheck ncclguard.io/preflight holds its Workload instead (docs/operator.md).
  bool defer_to_kueue = true;
  // The gate's fast path: a job whose validated nodes already exist when it is created is
  // admitted unsuspended (the in-process webhook asks the controller's count, core/gate.h);
  // false holds every job until the controller releases it.
  bool admit_when_ready = true;
  // How long the AdmissionCheck stays Pending on a Workload with quota before answering Retry
  // (Kueue releases the quota and requeues the Workload after retry_after_seconds).
  int hold_timeout_seconds = 1800;
  int retry_after_seconds = 60;
  // SageMaker HyperPod's own verdicts on a node (core/hyperpod.h): a node it marks unhealthy,
  // or whose deep health check failed or is running, does not count even if the probe passed.
  HyperPodHealthPolicy hyperpod;
};

// Where the controller's background audit looks (core/audit.h, docs/operator.md "Audit").
struct AuditPolicy {
  // Empty: every namespace but the excluded ones.
  std::vector<std::string> namespaces;
  // Never audited, besides kube-system, kube-public, kube-node-lease and ncclguard's own.
  std::vector<std::string> excluded_namespaces;
  // How often everything is evaluated again, besides on start, on change and on policy change.
  int interval_seconds = 600;

  // Whether the background audit looks at `namespace_`; `own_namespace` is ncclguard's.
  bool Audits(std::string_view namespace_, std::string_view own_namespace = "") const;
};

// What ncclguard enforces. Built-in defaults match docs/rules.md; a YAML file (an NcclPolicy object
// or its bare spec) overrides them.
struct Policy {
  std::string guide_base_url;
  std::string socket_ifname;
  std::string cluster_domain;
  std::optional<std::string> default_instance_type;
  std::vector<InstanceType> instance_types;
  std::map<std::string, RuleOverride, std::less<>> rules;
  GatePolicy gate;
  int rendezvous_port = 29500;
  // Whether the controller marks one pod of each running job as its RAS reader, which the probe
  // on that pod's node queries (core/ras.h): false stops NCCL's RAS from being read at all.
  bool ras_reads = true;
  // What the webhook does with a job's recorded image digest (core/image_pin.h); a namespace's
  // ncclguard.io/image-pin label overrides it (PinModeIn).
  PinMode image_pin = PinMode::Pin;
  // What the webhook asks the schedulers for (core/placement_request.h); a namespace's
  // ncclguard.io/placement label overrides it (PlacementModeIn).
  PlacementMode placement = PlacementMode::Preferred;
  // The cluster's mode; a namespace's ncclguard.io/mode label overrides it (ModeIn).
  Mode mode = Mode::Enforce;
  AuditPolicy audit;

  static Policy Defaults();

  // By normalised name: "ml.p5.48xlarge" finds p5.48xlarge.
  const InstanceType* FindInstanceType(std::string_view name) const;
  // Adds what was observed on the nodes: a type no entry knows is added; a built-in entry's
  // counts are raised to the observed ones (never lowered); the policy's own entries stay.
  void Learn(const std::vector<ObservedInstanceType>& observed);
  bool RuleEnabled(std::string_view rule_id) const;
  // The level the rule reports at: its own action unless the policy overrides it.
  Level EffectiveLevel(std::string_view rule_id, Level rule_action) const;
};

// The mode in force in a namespace whose labels are `namespace_labels` (null or not an object:
// none): its ncclguard.io/mode label when that names a mode, else the policy's.
Mode ModeIn(const Policy& policy, const Json* namespace_labels);

// Applies the overrides in `yaml_text` on top of `base`; empty text, comments only or null has
// none. Throws PolicyError naming the field, or the line for text that the manifest reader
// (core::ParseDocuments) refuses. Every string read must be UTF-8.
Policy ParsePolicy(std::string_view yaml_text, const Policy& base = Policy::Defaults());

// The observed catalog in `value`: an NcclPolicy object (its status.observedInstanceTypes), its
// status, or the list itself, as `kubectl get ncclpolicy default -o yaml` (or -o json, or a
// jsonpath of the list) prints it; null or absent is empty. Throws PolicyError naming the field.
std::vector<ObservedInstanceType> ParseObservedCatalog(const Json& value);
// The list as the NcclPolicy's status.observedInstanceTypes holds it.
Json ObservedCatalogJson(const std::vector<ObservedInstanceType>& observed);

}  // namespace ncclguard::core
