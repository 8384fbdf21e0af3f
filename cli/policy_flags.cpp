#include "cli/policy_flags.h"

#include <CLI/CLI.hpp>

#include "cli/input.h"
#include "core/errors.h"

namespace ncclguard::cli {

void AddPolicyFlags(CLI::App& command, PolicyOptions& options) {
  command.add_option("--policy", options.policy_file,
                     "NcclPolicy YAML file overriding the defaults");
  command.add_option("--guide-base-url", options.guide_base_url, "base URL of the debugging guide");
}

core::Policy LoadPolicy(const PolicyOptions& options) {
  core::Policy policy = core::Policy::Defaults();
  if (options.policy_file) {
    const std::string text = ReadInput(*options.policy_file);
    try {
      policy = core::ParsePolicy(text, policy);
    } catch (const core::PolicyError& e) {
      throw core::PolicyError(*options.policy_file + ": " + e.what());
    }
  }
  if (options.guide_base_url) {
    if (options.guide_base_url->empty())
      throw core::PolicyError("--guide-base-url must not be empty");
    policy.guide_base_url = *options.guide_base_url;
  }
  return policy;
}

}  // namespace ncclguard::cli
