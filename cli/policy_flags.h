// The policy flags every subcommand takes: --policy, --catalog and --guide-base-url.
#pragma once

#include <optional>
#include <string>

#include "core/policy.h"

namespace CLI {
class App;
}

namespace ncclguard::cli {

struct PolicyOptions {
  std::optional<std::string> policy_file;
  // The instance types a cluster's controller learned from its nodes: what
  // `kubectl get ncclpolicy default -o yaml` (or -o json, or a jsonpath of
  // .status.observedInstanceTypes) prints, so offline results match the cluster's.
  std::optional<std::string> catalog_file;
  std::optional<std::string> guide_base_url;
};

void AddPolicyFlags(CLI::App& command, PolicyOptions& options);

// Loads the policy file (if any) over the defaults, learns the catalog file's instance types
// (docs/operator.md, "Instance type catalog": the policy's own entries stand), then applies flag
// overrides. Throws core::PolicyError naming the file.
core::Policy LoadPolicy(const PolicyOptions& options);
// The same with `base` in place of the defaults when no --policy file is given (`audit`: the
// cluster's NcclPolicy default).
core::Policy LoadPolicy(const PolicyOptions& options, core::Policy base);

}  // namespace ncclguard::cli
