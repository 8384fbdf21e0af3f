// `ncclguard probe --publish`: the DaemonSet's process. Runs the checks and writes the result to
// the cluster (probes/publisher.h) every --interval and on request, until SIGTERM; with
// --metrics-listen it also serves the last run's results to Prometheus (probes/metrics.h).
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "cli/duration.h"
#include "cli/health_server.h"
#include "cli/probe_command.h"
#include "cli/signals.h"
#include "kube/client.h"
#include "kube/config.h"
#include "log/log.h"
#include "probes/metrics.h"
#include "probes/publisher.h"
#include "probes/report.h"

namespace ncclguard::cli {
namespace {

int PublishUsageError(const std::string& message) {
  std::cerr << "ncclguard probe --publish: " << message << "\n";
  return probes::kProbeExitError;
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

  std::atomic<bool> any_timed_out{false};
  const std::vector<std::string> checks = options.checks;
  auto run_checks = [probe, checks, &any_timed_out, client, node_name] {
    // No --instance-type, file or DMI name (e.g. not an EC2 Nitro node): the Node's label.
    probes::ProbeOptions run = probe;
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
      publisher_options.metrics = std::make_shared<probes::ProbeMetrics>();
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
      publisher.Run(stop);
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
