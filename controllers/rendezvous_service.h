#pragma once

#include <optional>
#include <string>

#include "controllers/job_kind.h"
#include "core/json.h"
#include "core/policy.h"

namespace ncclguard::controllers {

using core::Json;

// The headless Service a job's ranks rendezvous through: clusterIP None, not-ready addresses
// published (ranks resolve each other before any is Ready), selector on the job's pods, the
// policy's rendezvous port, and the job as its controller owner (deleted with the job).
// `master_addr` (when known) is exposed as the annotation ncclguard.io/master-addr.
Json DesiredService(const Json& job, core::WorkloadKind kind, const core::Policy& policy,
                    const std::optional<std::string>& master_addr);

enum class ServiceStanding {
  Missing,   // create it
  Serving,   // ours and as desired, or made for the job by its own operator (JobSet's)
  Drifted,   // ours, owned by the job, but its selector, ports or annotation differ: patch
  NotOwned,  // a Service of that name that is not the job's: leave it alone and report it
};

ServiceStanding CompareService(const std::optional<Json>& existing, const Json& desired,
                               const Json& job);

// The merge patch that brings our drifted Service back to `desired`.
Json ServicePatch(const Json& existing, const Json& desired);

}  // namespace ncclguard::controllers
