// The host's netfilter rules (iptables-legacy, iptables-nft, nft) on the paths NCCL's TCP takes
// into the node: INPUT for host-network pods, FORWARD for pods on the pod network.
#include "probes/host_firewall.h"

#include "core/peer_status.h"
#include "probes/checks/check_util.h"

namespace ncclguard::probes {
namespace {

constexpr std::size_t kFindingsNamed = 3;

class HostFirewallCheck : public Check {
 public:
  HostFirewallCheck()
      : Check({"host-firewall", "host-firewall", core::FindingLevel::Fail, 65,
               "The host's netfilter rules (iptables-legacy, iptables-nft and nft, read from the "
               "kernel in the host's network namespace) drop or reject new TCP connections to "
               "NCCL's ports (the master port and the ephemeral range) on INPUT (host-network "
               "pods) or FORWARD (pod-network pods): a warning, a failure while the node's peers "
               "cannot reach it (the checks between nodes).",
               "Accept TCP from the training nodes' subnet on INPUT and FORWARD before the rule "
               "named (the suggested command), through the node's configuration management."}) {}

  CheckResult Run(ProbeContext& context) const override {
    const ProbeOptions& options = context.Options();
    const std::filesystem::path netns = FirewallNetns(options);
    const auto master_port = static_cast<std::uint16_t>(options.policy.rendezvous_port);
    const std::string expected = "no rule dropping new TCP connections to NCCL's ports";
    HostFirewall firewall;
    try {
      firewall = InspectHostFirewall(netns, master_port);
    } catch (const std::runtime_error& e) {
      return Result(CheckStatus::Skip, "", expected, e.what());
    }
    std::vector<std::string> read = firewall.sources;
    read.insert(read.end(), firewall.errors.begin(), firewall.errors.end());
    const std::string observed = Join(read, "; ");
    const std::string ports = "ports " + core::DescribePorts(firewall.input_ports.ranges) +
                              " (INPUT), " + core::DescribePorts(firewall.forward_ports.ranges) +
                              " (FORWARD)";
    const std::string expected_ports = "no rule dropping new TCP connections to NCCL's " + ports;
    if (firewall.findings.empty()) {
      if (!firewall.errors.empty() && firewall.sources.empty())
        return Result(CheckStatus::Skip, observed, expected_ports,
                      "cannot read the host's netfilter rules: " + Join(firewall.errors, "; "));
      if (!firewall.errors.empty())
        return Result(CheckStatus::Warn, observed, expected_ports,
                      "no rule read drops NCCL's " + ports +
                          ", but some rules could not be read: " + Join(firewall.errors, "; "));
      return Result(CheckStatus::Pass, observed, expected_ports,
                    "no netfilter rule drops or rejects new TCP connections to NCCL's " + ports);
    }
    std::vector<std::string> named;
    for (std::size_t i = 0; i < firewall.findings.size() && i < kFindingsNamed; ++i)
      named.push_back(core::DescribeFinding(firewall.findings[i]));
    std::string message = Join(named, "; ");
    if (firewall.findings.size() > kFindingsNamed)
      message += "; and " + std::to_string(firewall.findings.size() - kFindingsNamed) + " more";
    message +=
        ". NCCL's bootstrap, socket transport and the rendezvous use these ports: jobs across "
        "nodes hang at their first collective";
    // The rule read and the peers' verdict agree: the node is what its peers cannot reach.
    const std::string& peers = options.peer_standing;
    const bool peers_fail = peers == core::kPeerUnreachable || peers == core::kPeerPairFault ||
                            peers == core::kPeerUndecided;
    if (peers_fail) {
      message += "; its peers cannot reach it either (the checks between nodes: " + peers +
                 "): this rule is the likely cause";
    }
    CheckResult result = Result(peers_fail ? CheckStatus::Fail : CheckStatus::Warn, observed,
                                expected_ports, message);
    AttachFix(result, kAllowNcclTcp);
    return result;
  }
};

NCCLGUARD_REGISTER(HostFirewallCheck);

}  // namespace
}  // namespace ncclguard::probes
