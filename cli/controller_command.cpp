// `ncclguard controller`: the training-job controller, and the webhook in the same process when
// TLS files or --webhook-cert-secret are given. Runs until SIGTERM/SIGINT (exit 0) or until the
// lease is lost (exit 1). With --print-rbac it prints the RBAC its other flags need instead.
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/exit_code.h"
#include "cli/health_server.h"
#include "cli/policy_flags.h"
#include "cli/signals.h"
#include "cli/tag_resolution.h"
#include "cli/webhook_config.h"
#include "kube/config.h"
#include "kube/errors.h"
#include "kube/owner_reference.h"
#include "kube/stop_token.h"
#include "log/log.h"
#include "manager/controller_module.h"
#include "manager/manager.h"
#include "manager/webhook_cert_manager.h"
#include "webhook/server.h"

namespace ncclguard::cli {
namespace {

struct ControllerOptions {
  std::string kubeconfig;
  std::string context;
  bool leader_elect = true;
  std::string lease_namespace;        // empty: $POD_NAMESPACE, else ncclguard-system
  std::string owner_service_account;  // empty: $POD_SERVICE_ACCOUNT, else none
  std::string lease_name = "ncclguard-controller";
  int workers = 4;
  std::string log_level = "info";
  std::string log_format = "auto";
  kube::ClientOptions client;  // --kube-api-qps, --kube-api-burst
  std::string webhook_listen = "0.0.0.0:8443";
  std::string tls_cert_file;
  std::string tls_key_file;
  // Self-managed webhook certificates (docs/certificates.md); exclusive with the TLS files.
  std::string webhook_cert_secret;
  std::string webhook_service = "ncclguard-webhook";
  std::vector<std::string> webhook_hosts;
  std::string webhook_configuration = "ncclguard";
  std::string cert_dir = "/var/run/ncclguard/certs";
  // On SIGTERM: the webhook keeps answering this long (closing each connection), then waits
  // up to the drain timeout for requests in flight (docs/operator.md, "Upgrades").
  int webhook_shutdown_delay_ms = 0;
  int webhook_drain_timeout_ms = 20000;
  // Plain-HTTP /healthz and /readyz when no webhook is served ("" or "0": none).
  std::string health_listen = ":8081";
  // Plain-HTTP /metrics (and /healthz, /readyz) for Prometheus ("" or "0": none). Off unless
  // asked for, as in kubebuilder's scaffold: the chart asks (metrics.port).
  std::string metrics_listen;
  // The optional controllers' flags (ControllerModule::flag), each set or not.
  std::map<std::string, bool> optional_controllers;
  // Print the RBAC these flags need and exit (scripts/check-chart.sh).
  bool print_rbac = false;
  // The in-process webhook resolves a managed job's tags at admission (cli/tag_resolution.h).
  bool resolve_digests = false;
  int resolve_digests_budget_ms = 1500;
  std::vector<std::string> resolve_digests_plain_http;
  std::string resolve_digests_ca_file;
  PolicyOptions policy;
};

void AddControllerFlags(CLI::App* command, ControllerOptions& options) {
  command->add_option("--kubeconfig", options.kubeconfig,
                      "kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)");
  command->add_option("--context", options.context, "kubeconfig context (default: current)");
  command->add_flag("--leader-elect", options.leader_elect,
                    "reconcile only while holding the Lease (--leader-elect=false: run alone)");
  command->add_option("--lease-namespace", options.lease_namespace,
                      "namespace of the Lease (default: $POD_NAMESPACE, else ncclguard-system)");
  command->add_option("--lease-name", options.lease_name, "name of the Lease")
      ->capture_default_str();
  command->add_option("--owner-service-account", options.owner_service_account,
                      "ServiceAccount in the Lease's namespace that owns the Lease and certificate "
                      "Secret this process creates, so they are deleted with it (default: "
                      "$POD_SERVICE_ACCOUNT, else none)");
  command->add_option("--workers", options.workers, "jobs reconciled in parallel")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  command
      ->add_option("--kube-api-qps", options.client.qps,
                   "client-side request rate limit (requests a second; 0: none)")
      ->capture_default_str();
  command->add_option("--kube-api-burst", options.client.burst, "client-side burst")
      ->capture_default_str();
  command->add_option("--log-level", options.log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  command->add_option("--log-format", options.log_format, kLogFormatHelp)
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "json", "text"}));
  command
      ->add_option(
          "--webhook-listen", options.webhook_listen,
          "host:port of the webhook (with --tls-cert-file/--tls-key-file or --webhook-cert-secret)")
      ->capture_default_str();
  command->add_option("--tls-cert-file", options.tls_cert_file,
                      "PEM certificate: also serve the admission webhook in this process");
  command->add_option("--tls-key-file", options.tls_key_file, "PEM private key of the webhook");
  command->add_option("--webhook-cert-secret", options.webhook_cert_secret,
                      "self-managed certificates: keep a CA and serving certificate in this "
                      "Secret and serve the webhook with them (not with --tls-cert-file)");
  command
      ->add_option("--webhook-service", options.webhook_service,
                   "Service of the webhook: its DNS names are the certificate's SANs")
      ->capture_default_str();
  command->add_option("--webhook-host", options.webhook_hosts,
                      "extra SAN (DNS name or IP), repeatable: for a controller outside the "
                      "cluster");
  command
      ->add_option("--webhook-configuration", options.webhook_configuration,
                   "Mutating- and ValidatingWebhookConfiguration that get the CA bundle")
      ->capture_default_str();
  command
      ->add_option("--cert-dir", options.cert_dir,
                   "where the self-managed tls.crt and tls.key are written")
      ->capture_default_str();
  command
      ->add_option("--webhook-shutdown-delay-ms", options.webhook_shutdown_delay_ms,
                   "on SIGTERM, the webhook keeps answering this long (each answer closing its "
                   "connection) while the pod leaves the Service's endpoints")
      ->capture_default_str()
      ->check(CLI::Range(0, 600000));
  command
      ->add_option("--webhook-drain-timeout-ms", options.webhook_drain_timeout_ms,
                   "on SIGTERM, how long in-flight admissions may take after the delay")
      ->capture_default_str()
      ->check(CLI::Range(0, 600000));
  command
      ->add_option("--health-listen", options.health_listen,
                   "plain-HTTP /healthz and /readyz when no webhook is served (0: none)")
      ->capture_default_str();
  command->add_option(
      "--metrics-listen", options.metrics_listen,
      "host:port or :port of a plain-HTTP /metrics for Prometheus, on every replica "
      "(default: none)");
  command->add_flag(
      "--resolve-digests", options.resolve_digests,
      "the webhook resolves the image tags of a managed job's first pods to digests "
      "through their registry (with the pods' imagePullSecrets: needs get on "
      "Secrets) and pins them; the later pods are pinned to what those ran either way");
  command
      ->add_option("--resolve-digests-budget-ms", options.resolve_digests_budget_ms,
                   "the time one tag's resolution may take, auth included (two a pod at most)")
      ->capture_default_str()
      ->check(CLI::Range(100, 2000));
  command->add_option("--resolve-digests-plain-http", options.resolve_digests_plain_http,
                      "registry host:port spoken to over http, not https (repeatable)");
  command->add_option("--resolve-digests-ca-file", options.resolve_digests_ca_file,
                      "PEM CA bundle for registries, beside the system's");
  command->add_flag("--print-rbac", options.print_rbac,
                    "print the RBAC rules these flags need (as JSON) and exit, reading no files "
                    "and contacting nothing");
}

// One flag per optional controller (manager/controller_module.h, ControllerModule::flag), so that
// a new controller gets its flag from its declaration alone.
void AddOptionalControllerFlags(CLI::App* command, ControllerOptions& options) {
  for (const manager::ControllerModule* module : manager::ControllerModules()) {
    if (module->flag.empty()) continue;
    bool& enabled = options.optional_controllers[module->flag];
    enabled = module->flag_default;
    CLI::Option* flag = command->add_flag("--" + module->flag, enabled, module->summary);
    if (module->flag_default) flag->capture_default_str();
  }
}
std::set<std::string> EnabledOptionalControllers(const ControllerOptions& options) {
  std::set<std::string> enabled;
  for (const auto& [flag, set] : options.optional_controllers) {
    if (set) enabled.insert(flag);
  }
  return enabled;
}

// The flag combinations that cannot work, as one line; empty when fine.
std::string CertificateFlagsProblem(const ControllerOptions& options) {
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return "--tls-cert-file and --tls-key-file go together";
  }
  if (!options.webhook_cert_secret.empty() && !options.tls_cert_file.empty()) {
    return "--webhook-cert-secret (self-managed certificates) and --tls-cert-file/--tls-key-file "
           "(certificates from files, e.g. cert-manager) exclude each other: choose one";
  }
  if (options.webhook_cert_secret.empty()) return "";
  if (options.webhook_service.empty()) return "--webhook-service must not be empty";
  if (options.webhook_configuration.empty()) return "--webhook-configuration must not be empty";
  if (options.cert_dir.empty()) return "--cert-dir must not be empty";
  try {
    manager::CheckHosts(options.webhook_hosts);
  } catch (const manager::CertError& e) {
    return std::string("--webhook-host: ") + e.what();
  }
  return "";
}

// The environment variable's value; empty when it is not set.
std::string Environment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// The manager's settings from the flags and the pod's environment: the Lease's namespace
// ($POD_NAMESPACE) and the holder's identity ($POD_NAME). Neither the policy nor the owner: those
// are read from a file and the API server.
manager::ManagerOptions ManagerOptionsFrom(const ControllerOptions& options) {
  manager::ManagerOptions manager_options;
  manager_options.workers = options.workers;
  manager_options.leader_elect = options.leader_elect;
  manager_options.lease_name = options.lease_name;
  manager_options.lease_namespace = options.lease_namespace;
  if (manager_options.lease_namespace.empty()) {
    const std::string own = Environment("POD_NAMESPACE");
    manager_options.lease_namespace = own.empty() ? "ncclguard-system" : own;
  }
  if (const std::string pod = Environment("POD_NAME"); !pod.empty()) {
    manager_options.identity = pod;
  }
  manager_options.client = options.client;
  manager_options.enable = EnabledOptionalControllers(options);
  return manager_options;
}

// Throws kube::ConfigError.
kube::ClientConfig KubeClientConfig(const ControllerOptions& options) {
  kube::KubeConfigOptions kubeconfig_options;
  kubeconfig_options.context = options.context;
  return kube::LoadClientConfig(options.kubeconfig, kubeconfig_options);
}

// The ServiceAccount that owns the Lease and the certificate Secret this process creates (so
// they are deleted with it): --owner-service-account, else $POD_SERVICE_ACCOUNT; empty: none.
std::string OwnerServiceAccount(const ControllerOptions& options) {
  if (!options.owner_service_account.empty()) return options.owner_service_account;
  return Environment("POD_SERVICE_ACCOUNT");
}

// The owner as a reference, its uid read from the API server.
std::optional<kube::OwnerReference> LeaseOwner(const ControllerOptions& options,
                                               const kube::ClientConfig& config,
                                               const std::string& lease_namespace) {
  const std::string account = OwnerServiceAccount(options);
  if (account.empty()) return std::nullopt;
  kube::Client client(config);
  return kube::ServiceAccountOwner(client, lease_namespace, account);
}

// The webhook served in this process, with its certificates from files or self-managed; none
// without either.
struct InProcessWebhook {
  // Declared before the server, so it outlives the server's readiness gate.
  std::unique_ptr<manager::WebhookCertManager> certs;
  std::unique_ptr<webhook::WebhookServer> server;
};

// The tag resolution --resolve-digests asks for, over its own resolver and API client.
void UseTagResolution(const ControllerOptions& options, const kube::ClientConfig& config,
                      webhook::ServerConfig& webhook_config) {
  if (!options.resolve_digests) return;
  webhook::DigestResolverOptions resolver;
  resolver.budget = std::chrono::milliseconds(options.resolve_digests_budget_ms);
  resolver.plain_http_registries = options.resolve_digests_plain_http;
  resolver.ca_file = options.resolve_digests_ca_file;
  webhook_config.admit.resolve_digest =
      TagResolution{std::make_shared<webhook::DigestResolver>(std::move(resolver)),
                    std::make_shared<PullSecrets>(config)};
}

webhook::ServerConfig WebhookConfig(const ControllerOptions& options,
                                    const kube::ClientConfig& client_config,
                                    const std::string& tls_cert_file,
                                    const std::string& tls_key_file) {
  webhook::ServerConfig config =
      WebhookServerConfig(options.webhook_listen, tls_cert_file, tls_key_file, options.policy);
  config.shutdown_delay = std::chrono::milliseconds(options.webhook_shutdown_delay_ms);
  config.drain_timeout = std::chrono::milliseconds(options.webhook_drain_timeout_ms);
  UseTagResolution(options, client_config, config);
  return config;
}

// The certificate manager's settings (--webhook-cert-secret and the flags that go with it).
manager::WebhookCertOptions WebhookCertOptionsFrom(const ControllerOptions& options,
                                                   const manager::ManagerOptions& manager_options) {
  manager::WebhookCertOptions cert_options;
  cert_options.namespace_ = manager_options.lease_namespace;
  cert_options.secret_name = options.webhook_cert_secret;
  cert_options.service_name = options.webhook_service;
  cert_options.extra_hosts = options.webhook_hosts;
  cert_options.configuration_name = options.webhook_configuration;
  cert_options.cert_dir = options.cert_dir;
  cert_options.owner = manager_options.owner;
  return cert_options;
}

// Self-managed certificates (--webhook-cert-secret): the server reloads them when the
// certificate manager writes them. Throws when the webhook cannot start.
void StartWebhookWithOwnCertificates(const ControllerOptions& options,
                                     const manager::ManagerOptions& manager_options,
                                     const kube::ClientConfig& config, InProcessWebhook& webhook) {
  manager::WebhookCertOptions cert_options = WebhookCertOptionsFrom(options, manager_options);
  cert_options.files_written = [&server = webhook.server] {
    if (server) server->ReloadCertificateNow();
  };
  webhook.certs =
      std::make_unique<manager::WebhookCertManager>(kube::Client(config), std::move(cert_options));
  // Listen at once (with a placeholder until the Secret's certificate is written) so the
  // readiness probe gets its 503 rather than a refused connection.
  webhook.certs->WritePlaceholderIfMissing();
  webhook::ServerConfig webhook_config =
      WebhookConfig(options, config, webhook.certs->cert_file(), webhook.certs->key_file());
  webhook_config.ready_gate = [&certs = webhook.certs] { return certs->CertificateReady(); };
  webhook.server = std::make_unique<webhook::WebhookServer>(std::move(webhook_config));
  webhook.server->Start();
}

// Starts the webhook if the flags ask for one; false (said on stderr) when it cannot start.
bool StartWebhook(const ControllerOptions& options, const manager::ManagerOptions& manager_options,
                  const kube::ClientConfig& config, InProcessWebhook& webhook) {
  try {
    if (!options.webhook_cert_secret.empty()) {
      StartWebhookWithOwnCertificates(options, manager_options, config, webhook);
    } else if (!options.tls_cert_file.empty()) {
      webhook.server = std::make_unique<webhook::WebhookServer>(
          WebhookConfig(options, config, options.tls_cert_file, options.tls_key_file));
      webhook.server->Start();
    }
  } catch (const std::exception& e) {
    std::cerr << "ncclguard controller: webhook: " << e.what() << "\n";
    return false;
  }
  return true;
}

// Runs the controllers until `stop` fires or the lease is lost; nullopt when they could not
// start (the health server could not listen, said on stderr).
std::optional<manager::RunResult> RunControllers(const ControllerOptions& options,
                                                 const kube::ClientConfig& config,
                                                 manager::ManagerOptions manager_options,
                                                 InProcessWebhook& webhook,
                                                 const kube::StopToken& stop) {
  manager::Manager manager(config, std::move(manager_options));
  if (webhook.certs) {
    // On every replica, not only the leader: any may create or rotate the Secret, and all
    // serve what it holds. It ends with the manager's run (a lost lease too).
    manager.Add(
        {"webhook-certificates", false,
         [certs = webhook.certs.get()](const kube::StopToken& until) { certs->Run(until); }});
  }
  // Plain-HTTP probes only when no webhook serves its own /healthz and /readyz.
  std::unique_ptr<HealthServer> health;
  std::unique_ptr<HealthServer> metrics;
  if (!webhook.certs && !webhook.server && !HealthListenDisabled(options.health_listen)) {
    health = std::make_unique<HealthServer>(options.health_listen,
                                            [&manager] { return manager.Ready(); });
    try {
      health->Start();
    } catch (const std::exception& e) {
      std::cerr << "ncclguard controller: " << e.what() << "\n";
      return std::nullopt;
    }
  }
  if (!HealthListenDisabled(options.metrics_listen)) {
    metrics = std::make_unique<HealthServer>(
        options.metrics_listen, [&manager] { return manager.Ready(); }, "--metrics-listen");
    try {
      metrics->Start();
    } catch (const std::exception& e) {
      std::cerr << "ncclguard controller: " << e.what() << "\n";
      if (health) health->Shutdown();
      return std::nullopt;
    }
  }
  // A signal may have come first.
  const manager::RunResult result =
      stop.stopped() ? manager::RunResult::kStopped : manager.Run(stop);
  if (metrics) metrics->Shutdown();
  if (health) health->Shutdown();
  return result;
}

int ExitCode(const std::optional<manager::RunResult>& result) {
  if (!result) return 1;
  if (*result == manager::RunResult::kLostLease) {
    std::cerr << "ncclguard controller: lost the lease; exiting so that a restart starts fresh\n";
    return 1;
  }
  return 0;
}

// --print-rbac: the rules a run with these flags needs (manager::RequiredAccess), from the flags
// and the environment alone: no kubeconfig, no files, no API server. The owner is taken as found.
int PrintRbac(const ControllerOptions& options, std::ostream& out) {
  manager::ManagerOptions manager_options = ManagerOptionsFrom(options);
  if (const std::string account = OwnerServiceAccount(options); !account.empty()) {
    manager_options.owner = kube::OwnerReference{"v1", "ServiceAccount", account, ""};
  }
  std::vector<manager::Access> extra;
  if (!options.webhook_cert_secret.empty()) {
    extra = manager::WebhookCertAccess(WebhookCertOptionsFrom(options, manager_options));
  }
  if (options.resolve_digests) {
    extra.push_back(manager::Access("", {"secrets"}, {"get"},
                                    "webhook --resolve-digests: the imagePullSecrets of the pods "
                                    "whose image tags it resolves"));
  }
  out << manager::AccessAsRbac(manager::RequiredAccess(manager_options, extra)).dump(2) << "\n";
  return kExitClean;
}

int RunController(const ControllerOptions& options) {
  if (const std::string problem = CertificateFlagsProblem(options); !problem.empty()) {
    std::cerr << "ncclguard controller: " << problem << "\n";
    return kExitInputError;
  }
  if (options.print_rbac) return PrintRbac(options, std::cout);
  try {
    log::ConfigureFromFlags(options.log_level, options.log_format);
  } catch (const std::invalid_argument& e) {
    std::cerr << "ncclguard controller: " << e.what() << "\n";
    return kExitInputError;
  }
  manager::ManagerOptions manager_options = ManagerOptionsFrom(options);
  manager_options.base_policy = LoadPolicy(options.policy);
  kube::ClientConfig config;
  try {
    config = KubeClientConfig(options);
  } catch (const kube::ConfigError& e) {
    std::cerr << "ncclguard controller: " << e.what() << "\n";
    return kExitInputError;
  }
  manager_options.owner = LeaseOwner(options, config, manager_options.lease_namespace);

  // Declared before the signals: their thread may use it until it is joined.
  InProcessWebhook webhook;
  // Before the webhook's threads start, so that they inherit the blocked signals.
  TerminationSignals signals;
  if (!StartWebhook(options, manager_options, config, webhook)) return kExitInputError;
  if (webhook.server) {
    // The webhook answers with the policy the controllers use: the NcclPolicy "default" and the
    // catalog learned from the nodes. The server outlives the manager that calls this.
    manager_options.policy_changed =
        [server = webhook.server.get()](std::shared_ptr<const core::Policy> policy) {
          server->UsePolicy(std::move(policy));
        };
    // And judges a TrainJob with the runtime it names, from the controller's caches.
    manager_options.runtimes_ready = [server = webhook.server.get()](core::RuntimeLookup lookup) {
      server->UseRuntimes(std::move(lookup));
    };
    // And admits a job whose validated nodes exist without holding it (the gate's fast path).
    manager_options.gate_ready = [server = webhook.server.get()](core::GateLookup lookup) {
      server->UseGate(std::move(lookup));
    };
    // And pins a job's later pods to the image digests its first pods ran.
    manager_options.image_pins_ready = [server =
                                            webhook.server.get()](core::ImagePinLookup lookup) {
      server->UseImagePins(std::move(lookup));
    };
    // And asks for a job's pods to share one network block (Kueue's topology request, or a pod
    // affinity).
    manager_options.placement_ready = [server =
                                           webhook.server.get()](core::PlacementLookup lookup) {
      server->UsePlacement(std::move(lookup));
    };
  }
  const kube::StopToken stop;
  signals.StopOnSignal(stop, "stopping reconciles and releasing the lease", [&webhook] {
    // The webhook's shutdown delay runs while the manager stops and releases the lease.
    if (webhook.server) webhook.server->BeginShutdown();
  });

  const std::optional<manager::RunResult> result =
      RunControllers(options, config, std::move(manager_options), webhook, stop);
  stop.Stop();
  if (webhook.server) webhook.server->Shutdown();
  log::Flush();
  return ExitCode(result);
}

}  // namespace

Command AddControllerCommand(CLI::App& app) {
  auto options = std::make_shared<ControllerOptions>();
  CLI::App* command = app.add_subcommand("controller",
                                         "run the training-job controller (and the webhook, given "
                                         "TLS files or --webhook-cert-secret)");
  AddControllerFlags(command, *options);
  AddOptionalControllerFlags(command, *options);
  AddPolicyFlags(*command, options->policy);
  return {command, [options] { return RunController(*options); }};
}

}  // namespace ncclguard::cli
