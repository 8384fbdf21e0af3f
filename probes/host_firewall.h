// The host firewall as the node check host-firewall reads it (docs/guide.md section 16): the
// host's netfilter rules and which of them drop or reject NCCL's ports, as data other checks can
// weigh (a peer check that also fails makes it the cause).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/host_firewall.h"
#include "probes/context.h"

namespace ncclguard::probes {

struct HostFirewall {
  std::filesystem::path netns;    // the namespace read; empty: the probe's own
  core::NcclPorts input_ports;    // the master port and the namespace's ephemeral range
  core::NcclPorts forward_ports;  // the master port and a pod namespace's default range
  std::vector<core::FirewallFinding> findings;  // definite ones first
  std::vector<std::string> sources;             // what was read
  std::vector<std::string> errors;              // what could not be
};

// The namespace host-firewall reads: options.firewall_netns, else <host_root>/proc/1/ns/net;
// empty for "current".
std::filesystem::path FirewallNetns(const ProbeOptions& options);

// Reads the rules of `netns` (entered on a thread of its own) and finds what drops NCCL's ports
// (`master_port` and the ephemeral ranges). Throws std::runtime_error when the namespace cannot
// be entered; a table that cannot be read is in `errors`.
HostFirewall InspectHostFirewall(const std::filesystem::path& netns, std::uint16_t master_port);

}  // namespace ncclguard::probes
