#include <utility>  // before boost/asio (through pplx): its awaitable.hpp uses std::exchange

#include <pplx/threadpool.h>
#include <iostream>
#include <stdexcept>

#include "cli/commands.h"
#include "cli/signals.h"
#include "core/errors.h"
#include "log/log.h"
#include "webhook/server.h"

namespace ncclguard::cli {

webhook::ServerConfig WebhookServerConfig(const std::string& listen,
                                          const std::string& tls_cert_file,
                                          const std::string& tls_key_file,
                                          const PolicyOptions& policy) {
  webhook::ServerConfig config;
  config.listen = listen;
  config.tls_cert_file = tls_cert_file;
  config.tls_key_file = tls_key_file;
  if (const char* own = std::getenv("POD_NAMESPACE"); own != nullptr && *own != '\0') {
    config.admit.exempt_namespaces.emplace_back(own);
  }
  config.load_policy = [policy] { return LoadPolicy(policy); };
  if (policy.policy_file) config.policy_files.push_back(*policy.policy_file);
  return config;
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

}  // namespace ncclguard::cli
