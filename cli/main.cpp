// `ncclguard`: adds every subcommand (cli/commands.h), parses, and runs the one given.
#include <CLI/CLI.hpp>

#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/exit_code.h"

// jemalloc's options, read when it starts (MALLOC_CONF in the environment still wins). Freed
// pages go back to the kernel after 1 s (10 s by default), by a background thread rather than
// on a later malloc: a scrape of /metrics builds and frees ~20 MB on whichever listener thread
// answers it, and an otherwise idle controller never touched those arenas again, so they stayed
// resident (1,000 nodes x 14 checks: 42 MB before, 196 MB after 8 scrapes at 15 s; 43 MB with
// these; BENCHMARKS.md, "Metrics").
extern "C" {
// NOLINTNEXTLINE: the name and type jemalloc looks up.
const char* malloc_conf = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0";
}

namespace {

using ncclguard::cli::Command;

// In the order `ncclguard --help` lists them.
constexpr Command (*kCommands[])(CLI::App&) = {
    ncclguard::cli::AddLintCommand,    ncclguard::cli::AddFixCommand,
    ncclguard::cli::AddAuditCommand,   ncclguard::cli::AddDiagnoseCommand,
    ncclguard::cli::AddExplainCommand, ncclguard::cli::AddWebhookCommand,
    ncclguard::cli::AddProbeCommand,   ncclguard::cli::AddPeerCommand,
    ncclguard::cli::AddRasCommand,     ncclguard::cli::AddControllerCommand,
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ncclguard: keeps NCCL/EFA training jobs from failing for known reasons"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("ncclguard 0.1.0"));
  std::vector<Command> commands;
  for (const auto add : kCommands) commands.push_back(add(app));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? ncclguard::cli::kExitClean : ncclguard::cli::kExitInputError;
  }

  return ncclguard::cli::RunReportingErrors(
      [&] {
        for (const Command& command : commands) {
          if (command.app->parsed()) return command.run();
        }
        throw std::logic_error("a subcommand was parsed that main does not run");
      },
      std::cerr);
}
