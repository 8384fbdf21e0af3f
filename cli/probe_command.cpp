// `ncclguard probe --once`: runs the node checks and prints the report. Exit 0: no check failed;
// 1: a check failed; 2: the probe could not run (bad flags or inputs). --publish:
// probe_publish_command.cpp.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/health_server.h"
#include "cli/probe_command.h"
#include "core/contract.h"
#include "probes/check.h"
#include "probes/context.h"
#include "probes/instance_type.h"
#include "probes/publisher.h"
#include "probes/report.h"

namespace ncclguard::cli {
namespace {

int UsageError(const std::string& message) {
  std::cerr << "ncclguard probe: " << message << "\n";
  return probes::kProbeExitError;
}

bool IsNodeCheck(const std::string& id) { return probes::CheckRegistry::Find(id) != nullptr; }

}  // namespace

std::optional<std::string> BuildProbeOptions(const ProbeCommandOptions& options,
                                             probes::ProbeOptions& probe) {
  std::error_code error;
  if (!std::filesystem::is_directory(options.host_root, error))
    return "--host-root " + options.host_root + " is not a directory";
  for (const std::string& id : options.checks)
    if (!IsNodeCheck(id)) return "--check " + id + ": no such node check";
  if (!(options.check_timeout_seconds > 0 && options.check_timeout_seconds <= 3600))
    return "--check-timeout must be between 0 and 3600 seconds";

  probe.host_root = options.host_root;
  probe.node_name = options.node_name;
  probe.fabric_provider = options.fabric_provider;
  if (!options.firewall_netns.empty()) probe.firewall_netns = options.firewall_netns;
  probe.measure_bandwidth = options.bandwidth;
  probe.check_timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(options.check_timeout_seconds * 1000));
  probe.policy = LoadPolicy(options.policy);
  try {
    const auto resolved = probes::ResolveInstanceType(
        options.instance_type, options.instance_type_file, probes::HostFiles(options.host_root));
    probe.instance_type = resolved.name;
    probe.instance_type_source = resolved.source;
  } catch (const std::runtime_error& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

namespace {

void AddProbeFlags(CLI::App* probe, ProbeCommandOptions& options) {
  probe->add_flag("--once", options.once,
                  "run the checks once and print the report (with --publish: publish once)");
  probe->add_option("-o,--output", options.format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  probe->add_option("--host-root", options.host_root, "where the host's / is mounted");
  probe->add_option("--instance-type", options.instance_type, "the node's instance type");
  probe->add_option("--instance-type-file", options.instance_type_file,
                    "file with the instance type or the EC2 instance identity document");
  probe->add_option("--node-name", options.node_name,
                    "the node's name (default with --publish: $NODE_NAME)");
  probe->add_flag("--bandwidth", options.bandwidth, "also measure GPU peer copy bandwidth");
  probe->add_option("--check", options.checks, "run only this check (repeatable)");
  probe->add_option("--check-timeout", options.check_timeout_seconds, "seconds per check");
  // Tests point the EFA checks at Debian libfabric's tcp/sockets providers; hidden from help.
  probe->add_option("--fabric-provider", options.fabric_provider)->group("");
  // Tests: the network namespace host-firewall reads ("current": the probe's own, not entered).
  probe->add_option("--firewall-netns", options.firewall_netns)->group("");
  probe->add_flag("--publish", options.publish,
                  "DaemonSet mode: write the NodeValidation, node label and NcclReady condition, "
                  "every --interval and on request, until SIGTERM");
  probe->add_option("--interval", options.interval, "with --publish: time between runs (5m)");
  probe->add_option("--request-poll", options.request_poll,
                    "with --publish: how often to look for the " +
                        std::string(core::kProbeRequestedAnnotation) + " annotation (5s)");
  probe->add_option("--kubeconfig", options.kubeconfig,
                    "with --publish: kubeconfig file (default: $KUBECONFIG, in-cluster, "
                    "~/.kube/config)");
  probe->add_option("--metrics-listen", options.metrics_listen,
                    "with --publish: host:port or :port of a plain-HTTP /metrics for Prometheus "
                    "(default: none)");
  probe->add_option("--peer-period", options.peer_period,
                    "with --publish: run the checks between nodes in rounds of this period "
                    "(e.g. 2m; default: none)");
  probe->add_option("--peer-address", options.peer_address,
                    "with --peer-period: the address peers reach this probe at (default: $POD_IP)");
  probe->add_option("--peer-timeout", options.peer_timeout,
                    "with --peer-period: how long one test may take, each tier (2s)");
  probe->add_option("--peer-ports", options.peer_ports,
                    "with --peer-period: ports always tested besides the ephemeral sample (29500)");
  probe->add_option("--peer-ephemeral", options.peer_ephemeral,
                    "with --peer-period: ports of the peer's ip_local_port_range tested each "
                    "round (4)");
  probe->add_option("--peer-fabric", options.peer_fabric,
                    "with --peer-period: the fabric tier's libfabric provider: auto (the node "
                    "checks' provider, else tcp), a provider name, or none");
  // Tests pin the tcp provider's port to drop it alone; hidden from help.
  probe->add_option("--peer-fabric-port", options.peer_fabric_port)->group("");
  probe->add_option("--peer-host-netns", options.peer_host_netns,
                    "with --peer-period: also test the host path (host-network pods) from this "
                    "network namespace, e.g. /host/proc/1/ns/net (needs the privileged probe)");
  probe->add_option("--peer-host-address", options.peer_host_address,
                    "with --peer-host-netns: the node's address (default: $HOST_IP)");
  // Tests on one machine, whose nodes share a clock, run short rounds; hidden from help.
  probe->add_option("--peer-skew", options.peer_skew)->group("");
  probe->add_option("--ras-period", options.ras_period,
                    "with --publish: read NCCL's RAS in this node's RAS reader pods (one a "
                    "running job, picked by the controller) every period (e.g. 1m; default: "
                    "none)");
  probe
      ->add_option("--ras-format", options.ras_format,
                   "with --ras-period: the report asked for: text (default: the same verdict in a "
                   "few hundred bytes at any job size) or json (every rank, NCCL 2.28.7 and later)")
      ->check(CLI::IsMember({"text", "json"}));
  probe->add_option("--ras-timeout", options.ras_timeout,
                    "with --ras-period: how long a round's queries may take, all at once (10s)");
  probe->add_option("--ras-init-grace", options.ras_init_grace,
                    "with --ras-period: how long a pod's containers run before its RAS is read, "
                    "unless it said NCCL 2.27.3 or later (2m)");
  probe->add_option("--ras-proc-root", options.ras_proc_root,
                    "with --ras-period: the host's /proc, where pods' network namespaces are "
                    "found (default: <host-root>/proc; needs the privileged probe)");
  probe->add_option("--log-level", options.log_level,
                    "with --publish: trace, debug, info, warn, error or off");
  probe
      ->add_option("--log-format", options.log_format,
                   std::string("with --publish: ") + kLogFormatHelp)
      ->check(CLI::IsMember({"auto", "json", "text"}));
}

int RunProbe(const ProbeCommandOptions& options) {
  if (options.publish) return RunProbePublish(options);
  if (!options.once)
    return UsageError(
        "pass --once (run the checks once and print the report) or --publish (DaemonSet mode)");
  if (!HealthListenDisabled(options.metrics_listen))
    return UsageError("--metrics-listen needs --publish (--once alone serves nothing)");
  probes::ProbeOptions probe;
  if (auto problem = BuildProbeOptions(options, probe)) return UsageError(*problem);

  auto context = std::make_shared<probes::ProbeContext>(
      std::move(probe), std::make_shared<probes::RealFactSources>());
  const probes::ProbeReport report = probes::RunProbe(context, options.checks);
  if (options.format == "json") {
    std::cout << probes::ReportJson(report).dump(2) << "\n";
  } else {
    std::cout << probes::ReportText(report);
  }
  const int code = probes::ExitCode(report);
  if (report.timed_out) {
    // A check is still blocked in a driver call on a detached thread: leave without running
    // static destructors under it.
    std::cout.flush();
    std::fflush(nullptr);
    std::_Exit(code);
  }
  return code;
}

}  // namespace

Command AddProbeCommand(CLI::App& app) {
  auto options = std::make_shared<ProbeCommandOptions>();
  CLI::App* command = app.add_subcommand("probe", "run the node checks (exit 1 on a Fail)");
  AddProbeFlags(command, *options);
  AddPolicyFlags(*command, options->policy);
  return {command, [options] { return RunProbe(*options); }};
}

}  // namespace ncclguard::cli
