// Every subcommand of `ncclguard`, each defined in its own cli/<name>_command.cpp: it adds the
// subcommand and its flags to `app` and returns how to run it. main.cpp lists them.
#pragma once

#include "cli/command.h"

namespace ncclguard::cli {

Command AddLintCommand(CLI::App& app);
Command AddFixCommand(CLI::App& app);
Command AddAuditCommand(CLI::App& app);
Command AddDiagnoseCommand(CLI::App& app);
Command AddExplainCommand(CLI::App& app);
Command AddWebhookCommand(CLI::App& app);
Command AddProbeCommand(CLI::App& app);
Command AddPeerCommand(CLI::App& app);
Command AddRasCommand(CLI::App& app);
Command AddControllerCommand(CLI::App& app);

}  // namespace ncclguard::cli
