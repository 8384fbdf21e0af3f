// A running job's NcclHealth condition (guide section 9): what NCCL's RAS said when the probe on
// the node of the job's RAS reader pod last read it (that NodeValidation's status.ras,
// probes/ras_watch.h), with each rank's address mapped to its pod and node. Pure.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "controllers/conditions.h"
#include "core/json.h"

namespace ncclguard::controllers {

// The pod that should carry core::kRasReaderLabel: the one that carries it while it runs, else
// the first running pod by name for which `runs_ranks` holds (an MPIJob's launcher runs no NCCL);
// nullopt when none runs.
std::optional<std::string> PickRasReader(const std::vector<core::Json>& pods,
                                         const std::function<bool(const core::Json&)>& runs_ranks);

// What the condition says, or nullopt while nothing was read of the reader `reader` (no entry in
// its node's status.ras yet). `link`: the guide section's URL. `other_views`: what the job's
// other diagnoses say ("<id>: <line>"), quoted where one names the same pod as RAS.
std::optional<Condition> NcclHealthCondition(
    const std::vector<core::Json>& pods, const core::Json& reader,
    const std::map<std::string, core::Json, std::less<>>& validations, std::string_view link,
    const std::vector<std::string>& other_views = {});

}  // namespace ncclguard::controllers
