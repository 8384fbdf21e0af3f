// `ncclguard lint`: the rule findings for manifests; exit 1 on a deny.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "cli/analysis.h"
#include "cli/commands.h"
#include "cli/policy_flags.h"

namespace ncclguard::cli {
namespace {

struct LintOptions {
  std::vector<std::string> files;
  std::string output = "text";
  PolicyOptions policy;
};

int RunLint(const LintOptions& options) {
  const bool json = options.output == "json";
  const core::Policy policy = LoadPolicy(options.policy);
  const std::vector<FileAnalysis> analyses = AnalyzeFiles(options.files, policy);

  bool denied = false;
  std::size_t counts[3] = {0, 0, 0};
  core::Json json_findings = core::Json::array();
  std::string text;
  for (const FileAnalysis& file : analyses) {
    for (std::size_t i = 0; i < file.evaluations.size(); ++i) {
      for (const core::Finding& finding : file.evaluations[i].findings) {
        denied = denied || finding.level == core::Level::Deny;
        ++counts[static_cast<int>(finding.level)];
        if (json) {
          json_findings.push_back(core::ToJson(finding));
        } else {
          text += FormatFinding(finding, DocumentName(file, i));
        }
      }
    }
  }
  if (json) {
    std::cout << json_findings.dump(2, ' ', false, core::Json::error_handler_t::replace) << "\n";
  } else {
    std::cout << text << counts[static_cast<int>(core::Level::Deny)] << " deny, "
              << counts[static_cast<int>(core::Level::Warn)] << " warn, "
              << counts[static_cast<int>(core::Level::Fix)] << " fixable\n";
  }
  return denied ? kExitDenied : kExitClean;
}

}  // namespace

Command AddLintCommand(CLI::App& app) {
  auto options = std::make_shared<LintOptions>();
  CLI::App* command =
      app.add_subcommand("lint", "report rule findings for manifests (exit 1 on a deny)");
  command->add_option("-o,--output", options->output, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  command->add_option("files", options->files, "YAML/JSON files, - for stdin")->required();
  AddPolicyFlags(*command, options->policy);
  return {command, [options] { return RunLint(*options); }};
}

}  // namespace ncclguard::cli
