#pragma once

#include <optional>
#include <string>

#include "cli/commands.h"
#include "probes/context.h"

namespace ncclguard::cli {

// Checks the probe flags and fills `probe` from them (host root, checks, timeout, policy,
// instance type); returns the problem, for a usage error, when they do not make sense.
std::optional<std::string> BuildProbeOptions(const ProbeCommandOptions& options,
                                             const PolicyOptions& policy_options,
                                             probes::ProbeOptions& probe);

}  // namespace ncclguard::cli
