#pragma once

#include <functional>
#include <iosfwd>

namespace ncclguard::cli {

// Exit codes of the CLI (docs/contract.md): no deny finding, a deny finding (or a finding, a
// failed check), an input or usage error, an internal error (a bug: please report it).
inline constexpr int kExitClean = 0;
inline constexpr int kExitDenied = 1;
inline constexpr int kExitInputError = 2;
inline constexpr int kExitInternalError = 3;

// Runs a subcommand and returns its exit code. An exception it lets out is reported on `err`
// and mapped to one: an input or policy error is the user's (kExitInputError), anything else
// is ours (kExitInternalError), so that scripts can tell "fix your input" from "report a bug".
int RunReportingErrors(const std::function<int()>& command, std::ostream& err);

}  // namespace ncclguard::cli
