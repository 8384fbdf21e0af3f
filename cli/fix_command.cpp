#include <iostream>

#include "cli/analysis.h"
#include "cli/commands.h"

namespace ncclguard::cli {

int RunFix(const std::vector<std::string>& files, const PolicyOptions& options) {
  const core::Policy policy = LoadPolicy(options);
  std::vector<FileAnalysis> analyses = AnalyzeFiles(files, policy);
  const FixOutput output = FixAnalyses(analyses);
  std::cout << output.fixed << std::flush;
  std::cerr << output.unfixed;
  return output.denied ? kExitDenied : kExitClean;
}

}  // namespace ncclguard::cli
