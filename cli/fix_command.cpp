#include <iostream>

#include "cli/analysis.h"
#include "cli/commands.h"

namespace ncclguard::cli {

int RunFix(const std::vector<std::string>& files, const PolicyOptions& options) {
  const core::Policy policy = LoadPolicy(options);
  std::vector<FileAnalysis> analyses = AnalyzeFiles(files, policy);

  bool denied = false;
  std::string out;
  std::string unfixed;
  for (FileAnalysis& file : analyses) {
    for (std::size_t i = 0; i < file.evaluations.size(); ++i) {
      core::Evaluation& evaluation = file.evaluations[i];
      for (const core::Finding& finding : evaluation.findings) {
        if (finding.level == core::Level::Fix) continue;
        denied = denied || finding.level == core::Level::Deny;
        unfixed += FormatFinding(finding, DocumentName(file, i));
      }
      file.documents.documents[i] = std::move(evaluation.fixed);
    }
    if (!out.empty() && file.documents.format == core::DocumentFormat::YamlStream) out += "---\n";
    out += core::WriteDocuments(file.documents);
  }
  std::cout << out << std::flush;
  std::cerr << unfixed;
  return denied ? kExitDenied : kExitClean;
}

}  // namespace ncclguard::cli
