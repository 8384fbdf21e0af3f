#include "cli/commands.h"
#include "cli/input.h"
#include "core/errors.h"

namespace ncclguard::cli {

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
