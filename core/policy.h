#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/finding.h"

namespace ncclguard::core {

// "p5" for "p5.48xlarge": replicas of one job must not mix families.
std::string InstanceFamily(std::string_view instance_type);

struct InstanceType {
  std::string name;  // e.g. "p5.48xlarge"
  int efa_devices = 0;
  int gpus = 0;
  bool gpudirect_rdma = false;
};

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
  // How long the AdmissionCheck stays Pending on a Workload with quota before answering Retry
  // (Kueue releases the quota and requeues the Workload after retry_after_seconds).
  int hold_timeout_seconds = 1800;
  int retry_after_seconds = 60;
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

  static Policy Defaults();

  const InstanceType* FindInstanceType(std::string_view name) const;
  bool RuleEnabled(std::string_view rule_id) const;
  // The level the rule reports at: its own action unless the policy overrides it.
  Level EffectiveLevel(std::string_view rule_id, Level rule_action) const;
};

// Applies the overrides in `yaml_text` on top of `base`; empty text, comments only or null has
// none. Throws PolicyError naming the field, or the line for text that the manifest reader
// (core::ParseDocuments) refuses. Every string read must be UTF-8.
Policy ParsePolicy(std::string_view yaml_text, const Policy& base = Policy::Defaults());

}  // namespace ncclguard::core
