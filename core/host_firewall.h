// A node's netfilter rules as data (docs/guide.md section 16), and which of them drops or rejects
// a new TCP connection to NCCL's ports. Pure: probes/netfilter reads the rules from the kernel
// (iptables-legacy through getsockopt, nftables and iptables-nft through nfnetlink) into this
// model; the analyser walks the INPUT path (host-network pods) and the FORWARD path (pod-network
// pods) as the kernel would for one SYN from a training peer.
//
// What the walk assumes of that SYN: TCP over IPv4, conntrack state NEW, flags SYN only, from a
// peer (not loopback) to this node (not loopback). A condition on the peer's source address is
// taken to hold: a rule limited to the training subnet (the guide's fix) is taken to be about
// the peers. One on an interface other than lo, the destination address, or one the reader did
// not understand (a mark, a set it did not read, an unknown match) may or may not hold: a drop
// it guards, or one after an accept it guards, is reported as "may drop".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ncclguard::core {

enum class Tristate { kNo, kMaybe, kYes };

// The rules' sources, each rendered in its own tool's syntax.
enum class FirewallBackend { kIptablesLegacy, kNftables };

enum class FirewallPath { kInput, kForward };

enum class RuleVerdict {
  kContinue,  // no verdict (counter, log, mark): the next rule
  kAccept,
  kDrop,
  kReject,
  kJump,    // to `target`, back after it
  kGoto,    // to `target`, not back
  kReturn,  // to the calling chain, or the base chain's policy
  kUnknown  // a verdict or target the reader did not understand (queue, an unknown target)
};

struct PortRange {
  std::uint16_t first = 0;
  std::uint16_t last = 0;
  bool operator==(const PortRange&) const = default;
};

// A condition on the destination port; a rule's conditions all hold for it to match.
struct PortCondition {
  std::vector<PortRange> ranges;  // the port is in one of them
  bool negated = false;           // ... or, negated, in none
  bool unknown = false;           // a set or comparison not read: may hold for any port
};

// conntrack states, as the kernel's NF_CT_STATE_BIT values.
inline constexpr std::uint32_t kCtInvalid = 1;
inline constexpr std::uint32_t kCtEstablished = 2;
inline constexpr std::uint32_t kCtRelated = 4;
inline constexpr std::uint32_t kCtNew = 8;
inline constexpr std::uint32_t kCtUntracked = 64;

struct FirewallRule {
  std::string text;  // as its tool lists it: "-p tcp -m tcp --dport 22 -j ACCEPT"
  // Layer 4 protocol (6 is TCP); -1 for any.
  int protocol = -1;
  bool protocol_negated = false;
  std::vector<PortCondition> dports;
  // The conntrack states the rule matches (a mask of kCt*); 0 for no state condition.
  std::uint32_t ct_states = 0;
  // Every other condition, evaluated by the reader for the SYN described above: kNo for one that
  // cannot hold (input interface lo, destination 127.0.0.0/8, flags without SYN), kMaybe for one
  // it did not understand, with the reason in `not_understood`.
  Tristate other = Tristate::kYes;
  std::string not_understood;
  RuleVerdict verdict = RuleVerdict::kContinue;
  std::string target;  // the chain of a jump or goto
};

struct FirewallChain {
  std::string name;
  // A base chain is attached to a hook: these two are what the analyser walks.
  bool hook_input = false;
  bool hook_forward = false;
  RuleVerdict policy = RuleVerdict::kAccept;  // kAccept or kDrop, for a base chain
  std::vector<FirewallRule> rules;
};

struct FirewallTable {
  FirewallBackend backend = FirewallBackend::kIptablesLegacy;
  std::string family;  // "ip", "inet", "ip6" (nft's family names; legacy iptables is "ip")
  std::string name;    // "filter"
  std::vector<FirewallChain> chains;
};

// The ports NCCL uses on a path: the master port and the ephemeral range of the network
// namespace the listening process runs in.
struct NcclPorts {
  std::vector<PortRange> ranges;
};

struct FirewallFinding {
  FirewallPath path = FirewallPath::kInput;
  std::string where;    // "iptables (legacy) filter INPUT", "nft table inet filter chain input"
  std::string rule;     // the dropping rule's text, or "policy drop"
  bool policy = false;  // the chain's policy, no rule having accepted the SYN
  RuleVerdict verdict = RuleVerdict::kDrop;  // kDrop, kReject, or kUnknown (may drop)
  std::vector<PortRange> ports;              // the NCCL ports it drops, merged
  bool definite = true;  // false: "may drop" (a condition not understood, or an earlier rule
                         // that may accept)
  std::string caveat;    // why it is not definite
};

// Every base chain of INPUT and FORWARD (ip and inet families: IPv4) that drops or rejects a new
// TCP connection to one of the ports, the definite ones first, each with the first rule that
// does so. Jumps are followed (16 deep; a loop is cut and taken as "may"). Linear in the rules
// times the distinct port intervals their conditions cut the NCCL ports into (at most 256; past
// that, intervals are merged and a partial overlap is "may").
std::vector<FirewallFinding> FindNcclBlocks(const std::vector<FirewallTable>& tables,
                                            const NcclPorts& input_ports,
                                            const NcclPorts& forward_ports);

// "iptables (legacy) filter INPUT: -p tcp -m tcp --dport 32768:60999 -j DROP drops new TCP
// connections to ports 32768-60999 (host-network pods)".
std::string DescribeFinding(const FirewallFinding& finding);
std::string DescribePorts(const std::vector<PortRange>& ports);
std::string_view PathName(FirewallPath path);

}  // namespace ncclguard::core
