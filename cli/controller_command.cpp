#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "cli/commands.h"
#include "cli/json_log.h"
#include "cli/signals.h"
#include "controller/manager.h"
#include "kube/config.h"
#include "kube/errors.h"
#include "webhook/server.h"

namespace ncclguard::cli {

CLI::App* AddControllerCommand(CLI::App& app, ControllerCommandOptions& options) {
  CLI::App* command = app.add_subcommand(
      "controller", "run the training-job controller (and the webhook, given TLS files)");
  command->add_option("--kubeconfig", options.kubeconfig,
                      "kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)");
  command->add_option("--context", options.context, "kubeconfig context (default: current)");
  command->add_flag("--leader-elect", options.leader_elect,
                    "reconcile only while holding the Lease (--leader-elect=false: run alone)");
  command->add_option("--lease-namespace", options.lease_namespace,
                      "namespace of the Lease (default: $POD_NAMESPACE, else ncclguard-system)");
  command->add_option("--lease-name", options.lease_name, "name of the Lease")
      ->capture_default_str();
  command->add_option("--workers", options.workers, "jobs reconciled in parallel")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  command->add_option("--kube-api-qps", options.qps, "client-side request rate limit")
      ->capture_default_str();
  command->add_option("--kube-api-burst", options.burst, "client-side burst")
      ->capture_default_str();
  command->add_option("--log-level", options.log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  command
      ->add_option("--webhook-listen", options.webhook_listen,
                   "host:port of the webhook (with --tls-cert-file/--tls-key-file)")
      ->capture_default_str();
  command->add_option("--tls-cert-file", options.tls_cert_file,
                      "PEM certificate: also serve the admission webhook in this process");
  command->add_option("--tls-key-file", options.tls_key_file, "PEM private key of the webhook");
  return command;
}

int RunController(const ControllerCommandOptions& options, const PolicyOptions& policy) {
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    std::cerr << "ncclguard controller: --tls-cert-file and --tls-key-file go together\n";
    return kExitInputError;
  }
  ConfigureJsonLogging(options.log_level);
  controller::ManagerOptions manager_options;
  manager_options.base_policy = LoadPolicy(policy);
  manager_options.workers = options.workers;
  manager_options.leader_elect = options.leader_elect;
  manager_options.lease_name = options.lease_name;
  manager_options.lease_namespace = options.lease_namespace;
  if (manager_options.lease_namespace.empty()) {
    const char* own = std::getenv("POD_NAMESPACE");
    manager_options.lease_namespace = own != nullptr && *own != '\0' ? own : "ncclguard-system";
  }
  if (const char* pod = std::getenv("POD_NAME"); pod != nullptr && *pod != '\0') {
    manager_options.identity = pod;
  }
  manager_options.client.qps = options.qps;
  manager_options.client.burst = options.burst;

  kube::ClientConfig config;
  try {
    kube::KubeConfigOptions kubeconfig_options;
    kubeconfig_options.context = options.context;
    config = kube::LoadClientConfig(options.kubeconfig, kubeconfig_options);
  } catch (const kube::ConfigError& e) {
    std::cerr << "ncclguard controller: " << e.what() << "\n";
    return kExitInputError;
  }

  // Signals are taken by one thread with sigwait; every other thread inherits the mask.
  const sigset_t signals = BlockTerminationSignals();

  std::unique_ptr<webhook::WebhookServer> server;
  if (!options.tls_cert_file.empty()) {
    webhook::ServerConfig webhook_config = WebhookServerConfig(
        options.webhook_listen, options.tls_cert_file, options.tls_key_file, policy);
    try {
      server = std::make_unique<webhook::WebhookServer>(std::move(webhook_config));
      server->Start();
    } catch (const std::exception& e) {
      std::cerr << "ncclguard controller: webhook: " << e.what() << "\n";
      return kExitInputError;
    }
  }

  const kube::StopToken stop;
  std::thread signal_waiter([&signals, stop] {
    int received = 0;
    sigwait(&signals, &received);
    if (received == SIGTERM || received == SIGINT) {
      spdlog::info("{}", std::string("{\"msg\":\"received ") +
                             (received == SIGTERM ? "SIGTERM" : "SIGINT") +
                             "; stopping reconciles and releasing the lease\"}");
    }
    stop.Stop();
  });

  controller::RunResult result = controller::RunResult::kStopped;
  {
    controller::Manager manager(config, std::move(manager_options));
    result = manager.Run(stop);
  }
  if (server) server->Shutdown();
  if (!stop.stopped()) {
    // Lost the lease: wake the signal thread so it can be joined (the process exits anyway).
    pthread_kill(signal_waiter.native_handle(), SIGTERM);
  }
  signal_waiter.join();
  spdlog::default_logger()->flush();
  if (result == controller::RunResult::kLostLease) {
    std::cerr << "ncclguard controller: lost the lease; exiting so that a restart starts fresh\n";
    return 1;
  }
  return 0;
}

}  // namespace ncclguard::cli
