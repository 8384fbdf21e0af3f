// The host fixes the probe suggests are the guide's, word for word.
#include <gtest/gtest.h>

#include <sstream>

#include "probes/host_fixes.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

std::string CollapseSpaces(const std::string& text) {
  std::string collapsed;
  bool space = false;
  for (char c : text) {
    if (c == ' ' || c == '\n') {
      space = true;
      continue;
    }
    if (space && !collapsed.empty()) collapsed += ' ';
    space = false;
    collapsed += c;
  }
  return collapsed;
}

TEST(HostFixes, CommandsAndBlastRadiiAreQuotedFromTheGuide) {
  const std::string guide = ReadFile(SourcePath("docs/guide.md"));
  const std::string prose = CollapseSpaces(guide);
  for (const probes::HostFix& fix :
       {probes::kClearAcs, probes::kRemoveIpcNo, probes::kRemoveStaleShm,
        probes::kContainerdMemlock, probes::kDrainNode, probes::kAllowNcclTcp}) {
    std::istringstream lines{std::string(fix.command)};
    std::string line;
    while (std::getline(lines, line))
      EXPECT_NE(guide.find(line), std::string::npos) << "command line not in the guide: " << line;
    EXPECT_NE(prose.find("Blast radius: " + CollapseSpaces(std::string(fix.blast_radius))),
              std::string::npos)
        << "blast radius not in the guide: " << fix.blast_radius;
  }
}

}  // namespace
}  // namespace ncclguard::test
