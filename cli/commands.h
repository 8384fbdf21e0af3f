#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/exit_code.h"
#include "core/policy.h"
#include "kube/client.h"
#include "webhook/server.h"

namespace CLI {
class App;
}

namespace ncclguard::cli {

enum class OutputFormat { Text, Json };

inline constexpr const char* kLogFormatHelp =
    "json (one JSON object per line), text, or auto: json unless stderr is a terminal";

struct PolicyOptions {
  std::optional<std::string> policy_file;
  std::optional<std::string> guide_base_url;
};

// Loads the policy file (if any) over the defaults, then applies flag overrides.
core::Policy LoadPolicy(const PolicyOptions& options);

int RunLint(const std::vector<std::string>& files, OutputFormat format,
            const PolicyOptions& options);
int RunFix(const std::vector<std::string>& files, const PolicyOptions& options);
// `ncclguard diagnose`: the log diagnoses over saved NCCL/PyTorch logs (a file per rank, a
// Slurm output, `kubectl logs`; - for stdin), streamed. Exit 0: nothing found; 1: a finding;
// 2: usage or input error (nothing on stdout).
int RunDiagnose(const std::vector<std::string>& files, OutputFormat format,
                const PolicyOptions& options);
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

// The webhook server settings both `ncclguard webhook` and `ncclguard controller` use: listen
// address, certificate files, the policy (re-read when its file changes) and $POD_NAMESPACE
// exempt beside kube-system.
webhook::ServerConfig WebhookServerConfig(const std::string& listen,
                                          const std::string& tls_cert_file,
                                          const std::string& tls_key_file,
                                          const PolicyOptions& policy);

// Serves the admission webhook until SIGTERM/SIGINT, then drains and returns 0.
int RunWebhook(const WebhookOptions& options);

// `ncclguard explain`: one rule, node check or diagnosis by id; without one, the list of all.
struct ExplainOptions {
  std::string id;
  bool all = false;          // explain every one
  bool markdown = false;     // docs/rules.md
  bool guide_index = false;  // the index of docs/guide.md
  bool json = false;         // every one, as a JSON array
};
int RunExplain(const ExplainOptions& explain, const PolicyOptions& options);

// `ncclguard probe --once`: runs the node checks and prints the report. Exit 0: no check
// failed; 1: a check failed; 2: the probe could not run (bad flags or inputs).
struct ProbeCommandOptions {
  bool once = false;
  std::string format = "text";
  std::string host_root = "/";
  std::optional<std::string> instance_type;
  std::optional<std::string> instance_type_file;
  std::string node_name;
  bool bandwidth = false;
  std::vector<std::string> checks;  // empty: all
  double check_timeout_seconds = 10;
  std::string fabric_provider = "efa";  // tests use Debian libfabric's "tcp" or "sockets"
  // --publish (DaemonSet mode): write the report to the cluster every interval and on request.
  bool publish = false;
  std::string interval = "5m";
  std::string request_poll = "5s";
  std::string kubeconfig;
  std::string log_level = "info";
  std::string log_format = "auto";
};
// Adds the `probe` subcommand and its flags (the policy flags are the caller's).
CLI::App* AddProbeCommand(CLI::App& app, ProbeCommandOptions& options);
int RunProbe(const ProbeCommandOptions& options, const PolicyOptions& policy);
// `ncclguard probe --publish`: until SIGTERM (exit 0), or once with --once (exit as --once).
int RunProbePublish(const ProbeCommandOptions& options, const PolicyOptions& policy);

// `ncclguard controller`: the training-job controller, and the webhook in the same process when
// TLS files are given. Runs until SIGTERM/SIGINT (exit 0) or until the lease is lost (exit 1).
struct ControllerCommandOptions {
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
  // Answer Kueue AdmissionChecks with controllerName ncclguard.io/preflight
  // (manager/kueue_controller.cpp).
  bool kueue_admission_check = false;
};
// Adds the `controller` subcommand and its flags (the policy flags are the caller's).
CLI::App* AddControllerCommand(CLI::App& app, ControllerCommandOptions& options);
int RunController(const ControllerCommandOptions& options, const PolicyOptions& policy);

}  // namespace ncclguard::cli
