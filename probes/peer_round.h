// The checks between nodes as the probe DaemonSet runs them (docs/guide.md sections 2 and 16):
// rounds on the wall clock, the same for every probe of a group (the nodes of one instance type
// whose NodeValidation carries a peer block), so that no coordinator is needed. Round r starts at
// r x period:
//   - at its start each probe reads the group, judges the round before from what the others
//     published (core::JudgeSelf) and publishes its verdict when it changed; then it serves its
//     ports and fabric endpoint for a short window while it tests its ring peer
//     (core::RingPass) over TCP (its peer's master port and a sample of its ephemeral range)
//     and, where it has one, the fabric; a failed test is published at once;
//   - halfway through, each reads the group again and, where the first pass failed, runs the
//     second pass (core::CulpritPass), publishing a failure again.
// A probe's window of serving is every window of every round, whether or not a peer tests it:
// two probes that read the group a moment apart still find each other listening. What a round
// costs a node: two reads of the group, one or two TCP tests of a few ports and one fabric ping
// each, a few kilobytes; it writes only what changed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "core/peer_status.h"
#include "kube/stop_token.h"
#include "probes/peer_fabric.h"

namespace ncclguard::probes {

// The cluster side of a round: the group's NodeValidations, and this node's status.peer.
class PeerDirectory {
 public:
  virtual ~PeerDirectory() = default;
  // Every NodeValidation (the runner keeps its group's).
  virtual std::vector<core::Json> List() = 0;
  // Merges `peer` into this node's NodeValidation as status.peer; throws on failure.
  virtual void Publish(const core::Json& peer) = 0;
};

struct PeerRoundOptions {
  std::string node_name;
  std::string instance_type;  // the group
  std::string address;        // where peers reach this probe (the pod's IP)
  std::chrono::milliseconds period{std::chrono::minutes(2)};
  std::chrono::milliseconds timeout{std::chrono::seconds(2)};  // a test's, each tier
  // How long after a window opens the clients test: the clocks of two nodes differ by less (NTP
  // keeps them within milliseconds), and the servers' threads have started.
  std::chrono::milliseconds skew{1'500};
  // Where the ports are served (tests: the address).
  std::string serve_address = "0.0.0.0";
  // The host path (host-network pods, the node's INPUT rules): the host's network namespace
  // (<host root>/proc/1/ns/net), entered for its sockets, and the node's address there. Empty:
  // the pod path alone.
  std::string host_netns;
  std::string host_address;
  std::string host_serve_address = "0.0.0.0";
  std::vector<std::uint16_t> fixed_ports{29500};  // NCCL's master port
  std::size_t ephemeral = 4;                      // ports of the ephemeral range tested each round
  std::uint16_t port_first = 32768;               // this node's ip_local_port_range
  std::uint16_t port_last = 60999;
  // A group member whose NodeValidation is older than this (its lastProbeTime) is gone.
  std::chrono::milliseconds member_ttl{std::chrono::minutes(15)};
  std::function<std::chrono::system_clock::time_point()> clock;  // default system_clock::now
  // Each test as the client (tier, pass, passed, seconds), and each finished round (seconds,
  // its end, this node's standing): the probe's metrics.
  std::function<void(std::string_view, std::string_view, bool, double)> on_test;
  std::function<void(double, std::chrono::system_clock::time_point, std::string_view)> on_round;
  // Each change of this node's standing, and the first one at start.
  std::function<void(std::string_view)> on_standing;
};

// Throws core::InputError when the period leaves no room for a round's two windows.
void CheckPeerRoundOptions(const PeerRoundOptions& options);

class PeerRunner {
 public:
  // Opens an endpoint of the answering endpoint's provider for one ping; throws as Open does.
  using OpenPinger = std::function<std::unique_ptr<FabricEndpoint>()>;

  // The fabric tier: `fabric` answers the peers' pings (its address is published); each ping of
  // this node's own goes from an endpoint `open_pinger` opens for it, so that neither takes the
  // other's completions and each test makes a new connection where the provider has them (tcp;
  // a firewall that drops new connections lets an old one through). Null `fabric`: no fabric
  // tier (no provider opened, or none was asked for).
  PeerRunner(PeerRoundOptions options, std::shared_ptr<PeerDirectory> directory,
             std::unique_ptr<FabricEndpoint> fabric, OpenPinger open_pinger);

  // Rounds until `stop`: publishes the block first (retried each phase until it is written),
  // then joins each round at its start.
  void Run(const kube::StopToken& stop);

  // Publishes the block (its address, what it serves) unless it is written already; Run does
  // before its first round, so that the peers find this node in their next one.
  void Announce();

  // One round by hand (tests): both phases of round `round`, starting now, the waits given.
  void RunRound(std::uint64_t round, const kube::StopToken& stop,
                std::chrono::milliseconds second_phase_after);

  // What the node has published, or would publish next.
  core::PeerBlock block() const;

 private:
  struct Group {
    std::vector<std::string> nodes;  // sorted, this node among them
    std::vector<core::PeerMember> members;
  };
  Group ReadGroup();
  // Serves the round's ports and the fabric for one window on threads of their own while `work`
  // runs; returns how many tests reached this node.
  std::uint64_t ServeWhile(std::uint64_t round, const kube::StopToken& stop,
                           const std::function<void()>& work);
  std::vector<core::PeerTestResult> Test(const core::PeerMember& peer, std::string_view pass,
                                         std::uint64_t round);
  void Judge(std::uint64_t round, const Group& now);
  void PublishIfDirty();
  std::chrono::milliseconds Window() const;
  // One TCP test of `peer` on `path` (core::kPeerPathPod or kPeerPathHost).
  core::PeerTestResult TestTcp(const core::PeerMember& peer, std::string_view pass,
                               std::uint64_t round, std::string_view path);

  PeerRoundOptions options_;
  std::shared_ptr<PeerDirectory> directory_;
  std::unique_ptr<FabricEndpoint> fabric_;
  OpenPinger open_pinger_;
  mutable std::mutex mutex_;  // block_
  core::PeerBlock block_;
  bool dirty_ = true;  // block_ not yet written as it is
  // The last round this node took part in: its group, and whether a test reached it.
  std::optional<std::uint64_t> last_round_;
  std::vector<std::string> last_nodes_;
  bool last_tested_ = false;
  std::vector<core::PeerTestResult> last_tests_;  // its tests of that round
};

// Ports a node serves, and its peers test on it, in `round`: the fixed ports and `count` ports
// of its ephemeral range, the sample changing with the round.
std::vector<std::uint16_t> RoundPorts(const std::vector<std::uint16_t>& fixed, std::uint16_t first,
                                      std::uint16_t last, std::size_t count, std::uint64_t round);

}  // namespace ncclguard::probes
