// `ncclguard fix`: the manifests with the missing settings added; exit 1 when a deny remains.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "cli/analysis.h"
#include "cli/commands.h"
#include "cli/policy_flags.h"

namespace ncclguard::cli {
namespace {

struct FixOptions {
  std::vector<std::string> files;
  PolicyOptions policy;
};

int RunFix(const FixOptions& options) {
  const core::Policy policy = LoadPolicy(options.policy);
  std::vector<FileAnalysis> analyses = AnalyzeFiles(options.files, policy);
  const FixOutput output = FixAnalyses(analyses);
  std::cout << output.fixed << std::flush;
  std::cerr << output.unfixed;
  return output.denied ? kExitDenied : kExitClean;
}

}  // namespace

Command AddFixCommand(CLI::App& app) {
  auto options = std::make_shared<FixOptions>();
  CLI::App* command = app.add_subcommand("fix", "write the manifests with missing settings added");
  command->add_option("files", options->files, "YAML/JSON files, - for stdin")->required();
  AddPolicyFlags(*command, options->policy);
  return {command, [options] { return RunFix(*options); }};
}

}  // namespace ncclguard::cli
