#include <CLI/CLI.hpp>

#include <iostream>
#include <stdexcept>

#include "cli/commands.h"

namespace {

using ncclguard::cli::kExitInputError;

void AddPolicyFlags(CLI::App* command, ncclguard::cli::PolicyOptions& options) {
  command->add_option("--policy", options.policy_file,
                      "NcclPolicy YAML file overriding the defaults");
  command->add_option("--guide-base-url", options.guide_base_url,
                      "base URL of the debugging guide");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ncclguard: keeps NCCL/EFA training jobs from failing for known reasons"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("ncclguard 0.1.0"));

  ncclguard::cli::PolicyOptions policy;
  std::vector<std::string> files;
  std::string format = "text";

  CLI::App* lint =
      app.add_subcommand("lint", "report rule findings for manifests (exit 1 on a deny)");
  lint->add_option("-o,--output", format, "text or json")->check(CLI::IsMember({"text", "json"}));
  lint->add_option("files", files, "YAML/JSON files, - for stdin")->required();
  AddPolicyFlags(lint, policy);

  CLI::App* fix = app.add_subcommand("fix", "write the manifests with missing settings added");
  fix->add_option("files", files, "YAML/JSON files, - for stdin")->required();
  AddPolicyFlags(fix, policy);

  CLI::App* diagnose = app.add_subcommand(
      "diagnose", "diagnose NCCL/PyTorch logs (exit 1 on a finding, 2 on an input error)");
  diagnose->add_option("-o,--output", format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  diagnose->add_option("files", files, "log files, - for stdin")->required();
  AddPolicyFlags(diagnose, policy);

  ncclguard::cli::ExplainOptions explain_options;
  CLI::App* explain = app.add_subcommand(
      "explain", "explain a rule, node check or diagnosis (without an id: list them all)");
  explain->add_option("id", explain_options.id, "rule, node check or diagnosis id");
  explain->add_flag("--all", explain_options.all, "explain every rule, node check and diagnosis");
  explain->add_flag("--markdown", explain_options.markdown,
                    "print docs/rules.md (every rule, node check and diagnosis) as Markdown");
  explain->add_flag("--guide-index", explain_options.guide_index,
                    "print the index of docs/guide.md (every id and its section) as Markdown");
  explain->add_flag("--json", explain_options.json,
                    "print every rule, node check and diagnosis as a JSON array");
  AddPolicyFlags(explain, policy);

  ncclguard::cli::WebhookOptions webhook_options;
  CLI::App* webhook = app.add_subcommand("webhook", "serve the admission webhook over HTTPS");
  webhook->add_option("--listen", webhook_options.listen, "host:port to listen on")
      ->capture_default_str();
  webhook
      ->add_option("--tls-cert-file", webhook_options.tls_cert_file,
                   "PEM serving certificate (chain); reloaded when it changes")
      ->required();
  webhook->add_option("--tls-key-file", webhook_options.tls_key_file, "PEM private key")
      ->required();
  webhook
      ->add_option("--tls-min-version", webhook_options.tls_min_version,
                   "VersionTLS12 or VersionTLS13")
      ->capture_default_str();
  webhook->add_option("--exempt-namespace", webhook_options.exempt_namespaces,
                      "namespace never intercepted (repeatable; kube-system and $POD_NAMESPACE "
                      "always are)");
  webhook
      ->add_option("--reload-interval-ms", webhook_options.reload_interval_ms,
                   "how often certificate and policy files are checked for changes")
      ->capture_default_str()
      ->check(CLI::Range(10, 3600000));
  webhook
      ->add_option("--drain-timeout-ms", webhook_options.drain_timeout_ms,
                   "on SIGTERM, how long in-flight requests may take")
      ->capture_default_str()
      ->check(CLI::Range(0, 600000));
  webhook
      ->add_option("--shutdown-delay-ms", webhook_options.shutdown_delay_ms,
                   "on SIGTERM, keep answering this long (each answer closing its connection) "
                   "while the pod leaves the Service's endpoints")
      ->capture_default_str()
      ->check(CLI::Range(0, 600000));
  webhook
      ->add_option("--threads", webhook_options.threads,
                   "listener threads, at least 2: the listener's close runs on one of them and "
                   "waits for the others (default: the listener's own, 40)")
      ->check(CLI::Range(2, 256));
  webhook
      ->add_option("--log-level", webhook_options.log_level,
                   "trace, debug, info, warn, error or off")
      ->capture_default_str();
  webhook->add_option("--log-format", webhook_options.log_format, ncclguard::cli::kLogFormatHelp)
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "json", "text"}));
  AddPolicyFlags(webhook, webhook_options.policy);
  ncclguard::cli::ProbeCommandOptions probe_options;
  CLI::App* probe = ncclguard::cli::AddProbeCommand(app, probe_options);
  AddPolicyFlags(probe, policy);
  ncclguard::cli::ControllerCommandOptions controller_options;
  CLI::App* controller = ncclguard::cli::AddControllerCommand(app, controller_options);
  AddPolicyFlags(controller, policy);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitInputError;
  }

  return ncclguard::cli::RunReportingErrors(
      [&] {
        if (lint->parsed()) {
          return ncclguard::cli::RunLint(files,
                                         format == "json" ? ncclguard::cli::OutputFormat::Json
                                                          : ncclguard::cli::OutputFormat::Text,
                                         policy);
        }
        if (fix->parsed()) return ncclguard::cli::RunFix(files, policy);
        if (diagnose->parsed()) {
          return ncclguard::cli::RunDiagnose(files,
                                             format == "json" ? ncclguard::cli::OutputFormat::Json
                                                              : ncclguard::cli::OutputFormat::Text,
                                             policy);
        }
        if (webhook->parsed()) return ncclguard::cli::RunWebhook(webhook_options);
        if (explain->parsed()) return ncclguard::cli::RunExplain(explain_options, policy);
        if (probe->parsed()) return ncclguard::cli::RunProbe(probe_options, policy);
        if (controller->parsed()) return ncclguard::cli::RunController(controller_options, policy);
        throw std::logic_error("a subcommand was parsed that main does not run");
      },
      std::cerr);
}
