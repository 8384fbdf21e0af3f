// Running helper programs (controlplane.sh, kubectl, helm) from tests.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace ncclguard::testenv {

struct ProcessResult {
  int exit_code = -1;  // -1 when the program could not be started or was killed by a signal
  std::string stdout_text;
  std::string stderr_text;
};

// Runs argv[0] (looked up on PATH) with the current environment plus `env`
// overrides, stdin from /dev/null, and waits for it. Never throws for a
// failing program; the exit code says how it went.
ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env = {});

}  // namespace ncclguard::testenv
