// A subcommand of `ncclguard`: each cli/<name>_command.cpp adds its own (with its flags) through
// one Add<Name>Command in cli/commands.h, and main.cpp runs the one that was parsed.
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace ncclguard::cli {

struct Command {
  CLI::App* app;  // parsed() tells whether this is the subcommand given
  // Runs it after parsing, with the flags' values; returns the exit code (cli/exit_code.h).
  std::function<int()> run;
};

inline constexpr const char* kLogFormatHelp =
    "json (one JSON object per line), text, or auto: json unless stderr is a terminal";

}  // namespace ncclguard::cli
