#pragma once

#include <memory>
#include <vector>

#include "probes/check.h"
#include "probes/context.h"

namespace ncclguard::probes {

struct CheckRun {
  std::vector<CheckResult> results;  // in the order of the checks given
  bool timed_out = false;            // a check thread may still be running
};

// Runs the checks concurrently, each bounded by the context's check timeout: a check that does
// not answer in time is reported as Fail (a hung driver or file read) and left behind on its
// detached thread. A check that throws is reported as Fail with the exception's text. The
// checks must outlive the process (the registry's do); the context is shared with the threads.
CheckRun RunChecks(const std::vector<const Check*>& checks,
                   const std::shared_ptr<ProbeContext>& context);

}  // namespace ncclguard::probes
