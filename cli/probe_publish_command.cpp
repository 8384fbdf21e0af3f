// `ncclguard probe --publish`: the DaemonSet's process. Runs the checks and writes the result to
// the cluster (probes/publisher.h) every --interval and on request, until SIGTERM; with
// --metrics-listen it also serves the last run's results to Prometheus (probes/metrics.h).
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "cli/duration.h"
#include "cli/health_server.h"
#include "cli/probe_command.h"
#include "cli/signals.h"
#include "core/errors.h"
#include "core/peer_status.h"
#include "core/topology.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/resource.h"
#include "log/log.h"
#include "probes/metrics.h"
#include "probes/peer_directory.h"
#include "probes/peer_round.h"
#include "probes/peer_tcp.h"
#include "probes/publisher.h"
#include "probes/ras_watch.h"
#include "probes/report.h"

namespace ncclguard::cli {
namespace {

int PublishUsageError(const std::string& message) {
  std::cerr << "ncclguard probe --publish: " << message << "\n";
  return probes::kProbeExitError;
}

// The fabric tier's endpoint: `--peer-fabric auto` takes the node checks' provider (efa on EFA
// nodes) and falls back to libfabric's tcp provider, bound to the peer address, where that one
// has no device; null with none, or when no provider opens (logged: the TCP tier still runs).
// `service`: the port the tcp provider binds (the answering endpoint's, when pinned).
std::unique_ptr<probes::FabricEndpoint> OpenPeerFabric(const ProbeCommandOptions& options,
                                                       const std::string& address,
                                                       const std::string& service) {
  if (options.peer_fabric == "none") return nullptr;
  std::vector<std::string> providers;
  if (options.peer_fabric == "auto") {
    providers = {options.fabric_provider, "tcp"};
  } else {
    providers = {options.peer_fabric};
  }
  for (const std::string& provider : providers) {
    probes::FabricOptions fabric;
    fabric.provider = provider;
    if (provider == "tcp" || provider == "sockets") {
      fabric.source = address;
      fabric.service = service;
    }
    try {
      auto endpoint = probes::FabricEndpoint::Open(fabric);
      log::Info("peer checks: fabric tier", {{"provider", endpoint->Provider()}});
      return endpoint;
    } catch (const std::exception& e) {
      log::Warn("peer checks: no fabric endpoint with this provider",
                {{"provider", provider}, {"error", e.what()}});
    }
  }
  return nullptr;
}

// The label value of a standing in the probe's metrics: "PairFault" is "pair-fault".
std::string StandingLabel(std::string_view standing) {
  std::string label;
  for (const char c : standing) {
    if (std::isupper(static_cast<unsigned char>(c)) != 0) {
      if (!label.empty()) label += '-';
      label += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      label += c;
    }
  }
  return label;
}

// The runner of --peer-period, or null without it. Throws core::InputError for bad flags.
std::unique_ptr<probes::PeerRunner> MakePeerRunner(const ProbeCommandOptions& options,
                                                   const std::string& node_name,
                                                   const std::string& instance_type,
                                                   std::chrono::milliseconds interval,
                                                   std::shared_ptr<kube::Client> client,
                                                   std::shared_ptr<probes::ProbeMetrics> metrics) {
  if (options.peer_period.empty() || options.peer_period == "0") return nullptr;
  probes::PeerRoundOptions peer;
  peer.node_name = node_name;
  peer.instance_type = instance_type;
  peer.host_netns = options.peer_host_netns;
  peer.host_address = options.peer_host_address;
  if (peer.host_address.empty()) {
    if (const char* from_env = std::getenv("HOST_IP")) peer.host_address = from_env;
  }
  peer.address = options.peer_address;
  if (peer.address.empty()) {
    if (const char* from_env = std::getenv("POD_IP")) peer.address = from_env;
  }
  try {
    peer.period = ParseDuration(options.peer_period, "--peer-period");
    peer.timeout = ParseDuration(options.peer_timeout, "--peer-timeout");
    peer.skew = ParseDuration(options.peer_skew, "--peer-skew");
  } catch (const std::invalid_argument& e) {
    throw core::InputError(e.what());
  }
  peer.fixed_ports = probes::ParsePeerPorts(options.peer_ports);
  peer.ephemeral = options.peer_ephemeral;
  peer.member_ttl = 3 * interval;
  if (metrics) {
    peer.on_test = [metrics](std::string_view tier, std::string_view pass, bool passed,
                             double seconds) {
      metrics->RecordPeerTest(tier, pass, passed, seconds);
    };
    peer.on_standing = [metrics](std::string_view standing) {
      metrics->SetPeerStanding(StandingLabel(standing));
    };
    peer.on_round = [metrics](double seconds, std::chrono::system_clock::time_point finished,
                              std::string_view standing) {
      metrics->RecordPeerRound(seconds, finished, StandingLabel(standing));
    };
  }
  try {
    std::tie(peer.port_first, peer.port_last) = probes::ReadLocalPortRange();
  } catch (const core::InputError& e) {
    log::Warn("peer checks: the default ephemeral range", {{"error", e.what()}});
  }
  probes::CheckPeerRoundOptions(peer);
  auto answering = OpenPeerFabric(options, peer.address, options.peer_fabric_port);
  probes::PeerRunner::OpenPinger open_pinger;
  if (answering) {
    probes::FabricOptions pinger;
    // "tcp;ofi_rxm" is what answered for "tcp".
    pinger.provider =
        answering->Provider().starts_with("tcp") ? "tcp" : std::string(answering->Provider());
    if (pinger.provider == "tcp" || pinger.provider == "sockets") pinger.source = peer.address;
    open_pinger = [pinger] { return probes::FabricEndpoint::Open(pinger); };
  }
  // The group: the instance type, and the node's closest network block where it has one.
  std::string block;
  try {
    const core::Json node = client->Get(kube::resources::Nodes().Named(node_name));
    if (node.contains("metadata") && node["metadata"].is_object()) {
      block = core::ClosestNetworkBlock(node["metadata"].value("labels", core::Json::object()));
    }
  } catch (const std::exception& e) {
    log::Warn("peer checks: cannot read the node's topology labels (grouped by instance type)",
              {{"error", e.what()}});
  }
  const std::string group = core::PeerGroupOf(instance_type, block);
  log::Info("peer checks: group", {{"group", group}, {"block", block}});
  return std::make_unique<probes::PeerRunner>(
      peer, std::make_shared<probes::KubePeerDirectory>(client, node_name, group),
      std::move(answering), std::move(open_pinger));
}

// The RAS reads (probes/ras_watch.h), or nullptr without --ras-period.
std::unique_ptr<probes::RasWatcher> MakeRasWatcher(const ProbeCommandOptions& options,
                                                   const std::string& node_name,
                                                   std::shared_ptr<kube::Client> client,
                                                   std::shared_ptr<probes::ProbeMetrics> metrics) {
  if (options.ras_period.empty() || options.ras_period == "0") return nullptr;
  probes::RasWatchOptions ras;
  try {
    ras.period = ParseDuration(options.ras_period, "--ras-period");
    ras.timeout = ParseDuration(options.ras_timeout, "--ras-timeout");
    ras.init_grace = ParseDuration(options.ras_init_grace, "--ras-init-grace");
  } catch (const std::invalid_argument& e) {
    throw core::InputError(e.what());
  }
  if (ras.period.count() <= 0 || ras.timeout.count() <= 0) {
    throw core::InputError("--ras-period and --ras-timeout must be longer than 0");
  }
  if (ras.timeout >= ras.period) {
    throw core::InputError("--ras-timeout must be shorter than --ras-period");
  }
  ras.json = options.ras_format == "json";
  ras.proc_root = options.ras_proc_root.empty()
                      ? (std::filesystem::path(options.host_root) / "proc").string()
                      : options.ras_proc_root;
  if (metrics) {
    ras.on_round = [metrics](const std::vector<probes::RasPodStanding>& standings, double seconds) {
      std::map<std::string, int> answers;
      std::map<std::string, int> health;
      for (const probes::RasPodStanding& s : standings) {
        ++answers[s.answer];
        ++health[s.verdict ? std::string(core::RasHealthName(s.verdict->health)) : "NotRead"];
      }
      metrics->RecordRasRound(seconds, answers, health);
    };
  }
  return std::make_unique<probes::RasWatcher>(
      ras, std::make_shared<probes::KubeRasDirectory>(std::move(client), node_name));
}

}  // namespace

int RunProbePublish(const ProbeCommandOptions& options) {
  std::string node_name = options.node_name;
  if (node_name.empty())
    if (const char* from_env = std::getenv("NODE_NAME")) node_name = from_env;
  if (node_name.empty())
    return PublishUsageError(
        "no node name: pass --node-name or set NODE_NAME (downward API: spec.nodeName)");

  probes::PublisherOptions publisher_options;
  publisher_options.node_name = node_name;
  try {
    publisher_options.interval = ParseDuration(options.interval, "--interval");
    publisher_options.request_poll = ParseDuration(options.request_poll, "--request-poll");
    log::ConfigureFromFlags(options.log_level, options.log_format);
  } catch (const std::invalid_argument& e) {
    return PublishUsageError(e.what());
  }
  if (publisher_options.interval.count() <= 0)
    return PublishUsageError("--interval must be longer than 0");
  if (publisher_options.request_poll.count() <= 0)
    return PublishUsageError("--request-poll must be longer than 0");

  probes::ProbeOptions probe;
  ProbeCommandOptions named = options;
  named.node_name = node_name;
  if (auto problem = BuildProbeOptions(named, probe)) return PublishUsageError(*problem);

  std::shared_ptr<kube::Client> client;
  try {
    client = std::make_shared<kube::Client>(kube::LoadClientConfig(options.kubeconfig));
  } catch (const std::exception& e) {
    return PublishUsageError(e.what());
  }

  if (!HealthListenDisabled(options.metrics_listen)) {
    publisher_options.metrics = std::make_shared<probes::ProbeMetrics>();
  }
  std::unique_ptr<probes::PeerRunner> peer_runner;
  try {
    peer_runner = MakePeerRunner(options, node_name, probe.instance_type.value_or(""),
                                 publisher_options.interval, client, publisher_options.metrics);
  } catch (const core::InputError& e) {
    return PublishUsageError(e.what());
  }

  publisher_options.peer_checks = peer_runner != nullptr;
  std::unique_ptr<probes::RasWatcher> ras_watcher;
  try {
    ras_watcher = MakeRasWatcher(options, node_name, client, publisher_options.metrics);
  } catch (const core::InputError& e) {
    return PublishUsageError(e.what());
  }
  publisher_options.ras_reads = ras_watcher != nullptr;

  std::atomic<bool> any_timed_out{false};
  const std::vector<std::string> checks = options.checks;
  const probes::PeerRunner* runner = peer_runner.get();
  auto run_checks = [probe, checks, &any_timed_out, client, node_name, runner] {
    // No --instance-type, file or DMI name (e.g. not an EC2 Nitro node): the Node's label.
    probes::ProbeOptions run = probe;
    if (runner != nullptr) run.peer_standing = runner->block().standing;
    const probes::ResolvedInstanceType resolved = probes::WithNodeLabelFallback(
        {run.instance_type, run.instance_type_source}, *client, node_name);
    run.instance_type = resolved.name;
    run.instance_type_source = resolved.source;
    auto context =
        std::make_shared<probes::ProbeContext>(run, std::make_shared<probes::RealFactSources>());
    probes::ProbeReport report = probes::RunProbe(context, checks);
    if (report.timed_out) any_timed_out = true;
    return report;
  };

  kube::StopToken stop;
  int code = 0;
  {
    // Before the metrics server's and the publisher's threads start.
    TerminationSignals signals;
    // Served before the first run starts, so that a scrape finds the pod while its checks run.
    std::unique_ptr<HealthServer> metrics_server;
    if (!HealthListenDisabled(options.metrics_listen)) {
      metrics_server = std::make_unique<HealthServer>(
          options.metrics_listen, [] { return true; }, "--metrics-listen");
      try {
        metrics_server->Start();
      } catch (const std::exception& e) {
        return PublishUsageError(e.what());
      }
    }
    signals.StopOnSignal(stop, "stopping");
    probes::NodePublisher publisher(client, run_checks, publisher_options);
    log::Info("probe publisher started", {{"node", node_name},
                                          {"server", client->config().server},
                                          {"once", options.once},
                                          {"intervalMs", publisher_options.interval.count()}});
    if (options.once) {
      const auto report = publisher.RunOnce(stop);
      // Stopped by a signal before publishing succeeded: a clean stop, not a failure.
      code = report ? probes::ExitCode(*report) : (stop.stopped() ? 0 : probes::kProbeExitError);
    } else {
      std::thread peers;
      if (peer_runner) peers = std::thread([&] { peer_runner->Run(stop); });
      std::thread ras;
      if (ras_watcher) ras = std::thread([&] { ras_watcher->Run(stop); });
      publisher.Run(stop);
      if (peers.joinable()) peers.join();
      if (ras.joinable()) ras.join();
    }
    if (metrics_server) metrics_server->Shutdown();
  }
  log::Flush();
  if (any_timed_out) {
    // A check may still be blocked in a driver call on a detached thread.
    std::fflush(nullptr);
    std::_Exit(code);
  }
  return code;
}

}  // namespace ncclguard::cli
