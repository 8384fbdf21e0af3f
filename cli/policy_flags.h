// The policy flags every subcommand takes: --policy and --guide-base-url.
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
  std::optional<std::string> guide_base_url;
};

void AddPolicyFlags(CLI::App& command, PolicyOptions& options);

// Loads the policy file (if any) over the defaults, then applies flag overrides.
core::Policy LoadPolicy(const PolicyOptions& options);

}  // namespace ncclguard::cli
