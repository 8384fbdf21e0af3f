// `ncclguard ras`: asks a running job's NCCL RAS service (guide section 9) what `ncclras -v`
// would print, with ncclguard's bounded client (probes/ras_client.h), and says what it means
// (core/ras.h): the same verdict the probe writes and the job's NcclHealth condition shows.
// --count 2 --every 30s queries twice, so that a collective stuck between the two is told from a
// straggler. Exit 0: healthy; 1: a finding; 2: usage error or no answer.
#include <CLI/CLI.hpp>

#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>

#include "cli/commands.h"
#include "cli/duration.h"
#include "cli/exit_code.h"
#include "core/errors.h"
#include "core/json.h"
#include "core/ras.h"
#include "probes/ras_client.h"

namespace ncclguard::cli {
namespace {

struct RasOptions {
  std::string address = "localhost:28028";
  std::string netns;
  std::string timeout = "10s";
  bool text = false;
  bool raw = false;
  int count = 1;
  std::string every = "30s";
  std::string output = "text";
};

probes::RasQuery QueryOf(const RasOptions& options) {
  probes::RasQuery query;
  const auto address = probes::ParseRasAddress(options.address);
  if (!address) {
    throw core::InputError("--address " + options.address +
                           ": expected HOST:PORT with a port of 1-65535");
  }
  query.host = address->first;
  query.port = address->second;
  query.netns = options.netns;
  query.json = !options.text;
  return query;
}

core::Json VerdictJson(const core::RasReport& report, const core::RasVerdict& verdict,
                       const probes::RasAnswer& answer) {
  core::Json ranks = core::Json::array();
  for (const core::RasProcess& p : verdict.ranks) {
    core::Json rank{{"pid", p.pid}, {"address", p.node}, {"gpu", p.gpu}, {"detail", p.detail}};
    if (p.rank) rank["rank"] = *p.rank;
    if (!p.communicator.empty()) rank["communicator"] = p.communicator;
    ranks.push_back(std::move(rank));
  }
  return {{"answer", std::string(probes::RasAnswerStatusName(answer.status))},
          {"format", answer.json ? "json" : "text"},
          {"ncclVersion", report.nccl_version},
          {"truncated", report.truncated},
          {"health", std::string(core::RasHealthName(verdict.health))},
          {"straggler", verdict.straggler},
          {"summary", verdict.summary},
          {"ranks", std::move(ranks)}};
}

int RunRas(const RasOptions& options) {
  if (options.count < 1) throw core::InputError("--count must be at least 1");
  const probes::RasQuery query = QueryOf(options);
  std::chrono::milliseconds timeout{};
  std::chrono::milliseconds every{};
  try {
    timeout = ParseDuration(options.timeout, "--timeout");
    every = ParseDuration(options.every, "--every");
  } catch (const std::invalid_argument& e) {
    throw core::InputError(e.what());
  }
  if (timeout.count() <= 0) throw core::InputError("--timeout must be longer than 0");
  std::optional<core::RasReport> previous;
  core::Json out = core::Json::array();
  int code = kExitClean;
  for (int i = 0; i < options.count; ++i) {
    if (i > 0) std::this_thread::sleep_for(every);
    probes::RasQuery q = query;
    q.server_timeout_s = static_cast<int>(std::max<std::int64_t>(1, timeout.count() / 1000 - 1));
    const probes::RasAnswer answer = probes::QueryRas({q}, timeout).front();
    if (answer.status != probes::RasAnswerStatus::Answered &&
        answer.status != probes::RasAnswerStatus::TooLarge) {
      std::cerr << "ncclguard ras: " << options.address << ": "
                << probes::RasAnswerStatusName(answer.status) << ": " << answer.error << "\n";
      return kExitInputError;
    }
    if (options.raw) {
      std::cout << answer.report;
      continue;
    }
    std::vector<core::RasReport> reports = core::ReadRasReports(answer.report);
    if (reports.empty()) {
      std::cerr << "ncclguard ras: " << options.address << ": the answer holds no RAS report\n";
      return kExitInputError;
    }
    core::RasReport& report = reports.back();
    const core::RasVerdict verdict = core::JudgeRas(report, previous ? &*previous : nullptr);
    if (verdict.health != core::RasHealth::Healthy) code = kExitDenied;
    if (options.output == "json") {
      out.push_back(VerdictJson(report, verdict, answer));
    } else {
      std::cout << options.address << ": NCCL "
                << (report.nccl_version.empty() ? "(version not said)" : report.nccl_version)
                << " (" << (answer.json ? "json" : "text") << ", " << answer.took.count()
                << " ms): " << core::RasHealthName(verdict.health) << ": " << verdict.summary
                << (report.truncated ? " [report cut short]" : "") << "\n";
    }
    previous = std::move(report);
  }
  if (options.output == "json" && !options.raw) {
    std::cout << out.dump(2, ' ', false, core::Json::error_handler_t::replace) << "\n";
  }
  return code;
}

}  // namespace

Command AddRasCommand(CLI::App& app) {
  auto options = std::make_shared<RasOptions>();
  CLI::App* command = app.add_subcommand(
      "ras",
      "ask a running job's NCCL RAS service what it sees (exit 1 on a dead, erroring, stuck or "
      "unresponsive rank, 2 on no answer)");
  command->add_option("--address", options->address,
                      "HOST:PORT of the RAS service (NCCL_RAS_ADDR; localhost:28028)");
  command->add_option("--netns", options->netns,
                      "ask from inside this network namespace, e.g. /proc/PID/ns/net of a "
                      "training process (needs CAP_SYS_ADMIN)");
  command->add_option("--timeout", options->timeout, "how long a query may take (10s)");
  command->add_flag("--text", options->text,
                    "ask for the text report even where the server has JSON (2.28.7 and later)");
  command->add_flag("--raw", options->raw,
                    "print the report as received (for `ncclguard diagnose` later)");
  command->add_option("--count", options->count,
                      "how many queries (2 or more tell a stuck collective from a straggler)");
  command->add_option("--every", options->every, "the time between queries (30s)");
  command->add_option("-o,--output", options->output, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  return {command, [options] { return RunRas(*options); }};
}

}  // namespace ncclguard::cli
