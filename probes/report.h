#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "probes/check.h"
#include "probes/context.h"

namespace ncclguard::probes {

struct ProbeReport {
  std::string node_name;
  std::string instance_type;  // empty when unknown
  std::string instance_type_source;
  std::vector<CheckResult> checks;
  CheckStatus summary = CheckStatus::Pass;
  std::chrono::system_clock::time_point probe_time;
  std::string probe_version;
  bool timed_out = false;  // some check is still running on a detached thread
};

// Fail if any check failed, else Warn if any warned, else Pass; Skips do not count.
CheckStatus Summarize(const std::vector<CheckResult>& checks);

// Runs every registered check (or the ones named in `only`) and assembles the report.
ProbeReport RunProbe(const std::shared_ptr<ProbeContext>& context,
                     const std::vector<std::string>& only = {});

// 2026-12-02T14:05:09Z
std::string Rfc3339(std::chrono::system_clock::time_point time);
// "2026-12-07T16:00:00Z" (what Rfc3339 writes, and the API server's times); nullopt for anything
// else.
std::optional<std::chrono::system_clock::time_point> ParseRfc3339(const std::string& text);

core::Json CheckResultJson(const CheckResult& result);
core::Json ReportJson(const ProbeReport& report);
std::string ReportText(const ProbeReport& report);

// `ncclguard probe` exit codes: 0 no Fail, 1 a Fail, 2 the probe could not run.
inline constexpr int kProbeExitPass = 0;
inline constexpr int kProbeExitFail = 1;
inline constexpr int kProbeExitError = 2;
int ExitCode(const ProbeReport& report);

std::string ProbeVersion();

}  // namespace ncclguard::probes
