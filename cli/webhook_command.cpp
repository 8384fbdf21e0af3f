// `ncclguard webhook`: serves the admission webhook until SIGTERM/SIGINT, then drains and
// exits 0.
#include <utility>  // before boost/asio (through pplx): its awaitable.hpp uses std::exchange

#include <pplx/threadpool.h>
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>
#include <stdexcept>

#include "cli/commands.h"
#include "cli/exit_code.h"
#include "cli/policy_flags.h"
#include "cli/signals.h"
#include "cli/webhook_config.h"
#include "log/log.h"
#include "webhook/server.h"

namespace ncclguard::cli {
namespace {

struct WebhookOptions {
  std::string listen = "0.0.0.0:8443";
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_min_version = "VersionTLS13";
  std::vector<std::string> exempt_namespaces;
  PolicyOptions policy;
  int reload_interval_ms = 1000;
  int drain_timeout_ms = 20000;
  int shutdown_delay_ms = 0;
  std::size_t threads = 0;  // 0: the listener's default
  std::string log_level = "info";
  std::string log_format = "auto";
};

void AddWebhookFlags(CLI::App& command, WebhookOptions& options) {
  command.add_option("--listen", options.listen, "host:port to listen on")->capture_default_str();
  command
      .add_option("--tls-cert-file", options.tls_cert_file,
                  "PEM serving certificate (chain); reloaded when it changes")
      ->required();
  command.add_option("--tls-key-file", options.tls_key_file, "PEM private key")->required();
  command.add_option("--tls-min-version", options.tls_min_version, "VersionTLS12 or VersionTLS13")
      ->capture_default_str();
  command.add_option("--exempt-namespace", options.exempt_namespaces,
                     "namespace never intercepted (repeatable; kube-system and $POD_NAMESPACE "
                     "always are)");
  command
      .add_option("--reload-interval-ms", options.reload_interval_ms,
                  "how often certificate and policy files are checked for changes")
      ->capture_default_str()
      ->check(CLI::Range(10, 3600000));
  command
      .add_option("--drain-timeout-ms", options.drain_timeout_ms,
                  "on SIGTERM, how long in-flight requests may take")
      ->capture_default_str()
      ->check(CLI::Range(0, 600000));
  command
      .add_option("--shutdown-delay-ms", options.shutdown_delay_ms,
                  "on SIGTERM, keep answering this long (each answer closing its connection) "
                  "while the pod leaves the Service's endpoints")
      ->capture_default_str()
      ->check(CLI::Range(0, 600000));
  command
      .add_option("--threads", options.threads,
                  "listener threads, at least 2: the listener's close runs on one of them and "
                  "waits for the others (default: the listener's own, 40)")
      ->check(CLI::Range(2, 256));
  command.add_option("--log-level", options.log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str();
  command.add_option("--log-format", options.log_format, kLogFormatHelp)
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "json", "text"}));
}

int RunWebhook(const WebhookOptions& options) {
  webhook::ServerConfig config = WebhookServerConfig(options.listen, options.tls_cert_file,
                                                     options.tls_key_file, options.policy);
  const auto min_version = webhook::ParseTlsVersion(options.tls_min_version);
  if (!min_version) {
    std::cerr << "ncclguard webhook: --tls-min-version " << options.tls_min_version
              << ": use VersionTLS12 or VersionTLS13\n";
    return kExitInputError;
  }
  config.tls_min_version = *min_version;
  config.admit.exempt_namespaces.insert(config.admit.exempt_namespaces.end(),
                                        options.exempt_namespaces.begin(),
                                        options.exempt_namespaces.end());
  config.reload_interval = std::chrono::milliseconds(options.reload_interval_ms);
  config.drain_timeout = std::chrono::milliseconds(options.drain_timeout_ms);
  config.shutdown_delay = std::chrono::milliseconds(options.shutdown_delay_ms);

  try {
    log::ConfigureFromFlags(options.log_level, options.log_format);
  } catch (const std::invalid_argument& e) {
    std::cerr << "ncclguard webhook: " << e.what() << "\n";
    return kExitInputError;
  }
  // Before the listener's threads start (next), so that they inherit the blocked signals.
  const TerminationSignals signals;
  if (options.threads > 0) crossplat::threadpool::initialize_with_threads(options.threads);

  std::unique_ptr<webhook::WebhookServer> server;
  try {
    server = std::make_unique<webhook::WebhookServer>(std::move(config));
    server->Start();
  } catch (const std::exception& e) {
    log::Error("webhook not started", {{"error", e.what()}});
    std::cerr << "ncclguard webhook: " << e.what() << "\n";
    return kExitInputError;
  }
  signals.Wait("draining in-flight requests");
  server->Shutdown();
  log::Flush();
  return 0;
}

}  // namespace

Command AddWebhookCommand(CLI::App& app) {
  auto options = std::make_shared<WebhookOptions>();
  CLI::App* command = app.add_subcommand("webhook", "serve the admission webhook over HTTPS");
  AddWebhookFlags(*command, *options);
  AddPolicyFlags(*command, options->policy);
  return {command, [options] { return RunWebhook(*options); }};
}

}  // namespace ncclguard::cli
