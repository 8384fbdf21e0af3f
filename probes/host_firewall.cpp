#include "probes/host_firewall.h"

#include <algorithm>

#include "probes/netfilter.h"

namespace ncclguard::probes {
namespace {

// A new network namespace's net.ipv4.ip_local_port_range: what pods on the pod network get.
constexpr core::PortRange kDefaultEphemeralPorts{32768, 60999};

core::NcclPorts PortsOf(std::uint16_t master_port, core::PortRange ephemeral) {
  core::NcclPorts ports;
  if (master_port < ephemeral.first || master_port > ephemeral.last)
    ports.ranges.push_back({master_port, master_port});
  ports.ranges.push_back(ephemeral);
  std::sort(ports.ranges.begin(), ports.ranges.end(),
            [](core::PortRange a, core::PortRange b) { return a.first < b.first; });
  return ports;
}

}  // namespace

std::filesystem::path FirewallNetns(const ProbeOptions& options) {
  if (options.firewall_netns) {
    if (*options.firewall_netns == "current") return {};
    return *options.firewall_netns;
  }
  return options.host_root / "proc/1/ns/net";
}

HostFirewall InspectHostFirewall(const std::filesystem::path& netns, std::uint16_t master_port) {
  HostFirewall firewall;
  firewall.netns = netns;
  NetfilterRead read = ReadNetfilterIn(netns);
  firewall.input_ports =
      PortsOf(master_port, read.ephemeral_ports.value_or(kDefaultEphemeralPorts));
  firewall.forward_ports = PortsOf(master_port, kDefaultEphemeralPorts);
  firewall.findings =
      core::FindNcclBlocks(read.tables, firewall.input_ports, firewall.forward_ports);
  firewall.sources = std::move(read.sources);
  firewall.errors = std::move(read.errors);
  return firewall;
}

}  // namespace ncclguard::probes
