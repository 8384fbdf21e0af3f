// `ncclguard probe`: what its two modes share (probe_command.cpp: --once, and the flags;
// probe_publish_command.cpp: --publish).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/policy_flags.h"
#include "probes/context.h"

namespace ncclguard::cli {

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
  // host-firewall's network namespace file; empty: <host-root>/proc/1/ns/net. Tests only.
  std::string firewall_netns;
  // --publish (DaemonSet mode): write the report to the cluster every interval and on request.
  bool publish = false;
  std::string interval = "5m";
  std::string request_poll = "5s";
  std::string kubeconfig;
  // Plain-HTTP /metrics (and /healthz, /readyz) with --publish ("" or "0": none).
  std::string metrics_listen;
  // The checks between nodes (probes/peer_round.h), with --publish: the round period ("" or
  // "0": none), the address peers reach this probe at (default $POD_IP), and what is tested.
  std::string peer_period;
  std::string peer_address;
  std::string peer_timeout = "2s";
  std::string peer_skew = "1500ms";  // how long after a window opens the clients test
  std::string peer_ports = "29500";
  std::size_t peer_ephemeral = 4;
  // "auto": the node checks' provider (efa), else libfabric's tcp; "none": no fabric tier.
  std::string peer_fabric = "auto";
  std::string peer_fabric_port;  // the tcp provider's port (tests pin it); empty: any
  // The host path: the host's network namespace file and the node's address (default $HOST_IP);
  // empty namespace: the pod path alone.
  std::string peer_host_netns;
  std::string peer_host_address;
  // NCCL's RAS read in the reader pods on this node (probes/ras_watch.h), with --publish: the
  // period ("" or "0": none), each round's timeout, the wait after a pod starts, and the host's
  // /proc (default <host-root>/proc).
  std::string ras_period;
  std::string ras_timeout = "10s";
  std::string ras_init_grace = "2m";
  std::string ras_proc_root;
  std::string ras_format = "text";  // what the probe asks NCCL for: text, or json (2.28.7+)
  std::string log_level = "info";
  std::string log_format = "auto";
  PolicyOptions policy;
};

// Checks the probe flags and fills `probe` from them (host root, checks, timeout, policy,
// instance type); returns the problem, for a usage error, when they do not make sense.
std::optional<std::string> BuildProbeOptions(const ProbeCommandOptions& options,
                                             probes::ProbeOptions& probe);

// `ncclguard probe --publish`: until SIGTERM (exit 0), or once with --once (exit as --once).
int RunProbePublish(const ProbeCommandOptions& options);

}  // namespace ncclguard::cli
