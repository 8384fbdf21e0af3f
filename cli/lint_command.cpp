#include <iostream>

#include "cli/analysis.h"
#include "cli/commands.h"

namespace ncclguard::cli {

int RunLint(const std::vector<std::string>& files, OutputFormat format,
            const PolicyOptions& options) {
  const core::Policy policy = LoadPolicy(options);
  const std::vector<FileAnalysis> analyses = AnalyzeFiles(files, policy);

  bool denied = false;
  std::size_t counts[3] = {0, 0, 0};
  core::Json json_findings = core::Json::array();
  std::string text;
  for (const FileAnalysis& file : analyses) {
    for (std::size_t i = 0; i < file.evaluations.size(); ++i) {
      for (const core::Finding& finding : file.evaluations[i].findings) {
        denied = denied || finding.level == core::Level::Deny;
        ++counts[static_cast<int>(finding.level)];
        if (format == OutputFormat::Json) {
          json_findings.push_back(core::ToJson(finding));
        } else {
          text += FormatFinding(finding, DocumentName(file, i));
        }
      }
    }
  }
  if (format == OutputFormat::Json) {
    std::cout << json_findings.dump(2, ' ', false, core::Json::error_handler_t::replace) << "\n";
  } else {
    std::cout << text << counts[static_cast<int>(core::Level::Deny)] << " deny, "
              << counts[static_cast<int>(core::Level::Warn)] << " warn, "
              << counts[static_cast<int>(core::Level::Fix)] << " fixable\n";
  }
  return denied ? kExitDenied : kExitClean;
}

}  // namespace ncclguard::cli
