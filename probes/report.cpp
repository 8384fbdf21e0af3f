#include "probes/report.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <sstream>

#include "probes/runner.h"

namespace ncclguard::probes {

CheckStatus Summarize(const std::vector<CheckResult>& checks) {
  CheckStatus summary = CheckStatus::Pass;
  for (const CheckResult& check : checks) {
    if (check.status == CheckStatus::Fail) return CheckStatus::Fail;
    if (check.status == CheckStatus::Warn) summary = CheckStatus::Warn;
  }
  return summary;
}

ProbeReport RunProbe(const std::shared_ptr<ProbeContext>& context,
                     const std::vector<std::string>& only) {
  std::vector<const Check*> checks;
  for (const Check* check : CheckRegistry::All()) {
    if (only.empty() || std::find(only.begin(), only.end(), check->Id()) != only.end())
      checks.push_back(check);
  }
  ProbeReport report;
  const ProbeOptions& options = context->Options();
  report.node_name = options.node_name;
  report.instance_type = options.instance_type.value_or("");
  report.instance_type_source = options.instance_type_source;
  report.probe_version = ProbeVersion();
  report.probe_time = context->Now();
  CheckRun run = RunChecks(checks, context);
  report.checks = std::move(run.results);
  report.timed_out = run.timed_out;
  report.summary = Summarize(report.checks);
  return report;
}

std::string Rfc3339(std::chrono::system_clock::time_point time) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

std::optional<std::chrono::system_clock::time_point> ParseRfc3339(const std::string& text) {
  std::tm tm{};
  char zulu = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &zulu) != 7 ||
      zulu != 'Z') {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

core::Json CheckResultJson(const CheckResult& result) {
  core::Json json{{"id", result.id},
                  {"status", StatusName(result.status)},
                  {"observed", result.observed},
                  {"expected", result.expected},
                  {"message", result.message},
                  {"guide", result.guide}};
  if (!result.suggested_command.empty()) {
    json["suggestedCommand"] = result.suggested_command;
    json["blastRadius"] = result.blast_radius;
  }
  return json;
}

core::Json ReportJson(const ProbeReport& report) {
  core::Json checks = core::Json::array();
  for (const CheckResult& result : report.checks) checks.push_back(CheckResultJson(result));
  core::Json json{{"node", report.node_name},
                  {"instanceType", report.instance_type},
                  {"instanceTypeSource", report.instance_type_source},
                  {"summary", StatusName(report.summary)},
                  {"probeTime", Rfc3339(report.probe_time)},
                  {"probeVersion", report.probe_version},
                  {"checks", std::move(checks)}};
  return json;
}

std::string ReportText(const ProbeReport& report) {
  std::ostringstream out;
  out << "ncclguard probe " << report.probe_version << " at " << Rfc3339(report.probe_time);
  if (!report.node_name.empty()) out << " on " << report.node_name;
  out << "\ninstance type: "
      << (report.instance_type.empty() ? std::string("unknown") : report.instance_type) << " ("
      << report.instance_type_source << ")\n\n";
  for (const CheckResult& result : report.checks) {
    out << StatusName(result.status) << "  " << result.id << ": " << result.message << "\n";
    if (!result.observed.empty()) out << "      observed: " << result.observed << "\n";
    if (!result.expected.empty()) out << "      expected: " << result.expected << "\n";
    if (!result.suggested_command.empty()) {
      std::string command = result.suggested_command;
      for (auto at = command.find('\n'); at != std::string::npos; at = command.find('\n', at + 1))
        command.insert(at + 1, "                ");
      out << "      host fix: " << command << "\n";
      out << "      blast radius: " << result.blast_radius << "\n";
    }
    if (result.status == CheckStatus::Fail || result.status == CheckStatus::Warn)
      out << "      guide: " << result.guide << "\n";
  }
  out << "\nsummary: " << StatusName(report.summary) << "\n";
  return out.str();
}

int ExitCode(const ProbeReport& report) {
  return report.summary == CheckStatus::Fail ? kProbeExitFail : kProbeExitPass;
}

std::string ProbeVersion() { return NCCLGUARD_PROBE_VERSION; }

}  // namespace ncclguard::probes
