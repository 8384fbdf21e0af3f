// The node's netfilter rules, read as data through the kernel's own interfaces (docs/guide.md
// section 16), into core/host_firewall.h's model:
//   - iptables-legacy: getsockopt(IPT_SO_GET_INFO, IPT_SO_GET_ENTRIES) on a raw socket, the
//     filter table's ipt_entry blob walked with every offset checked;
//   - nftables, iptables-nft included (it writes nftables rules): NFT_MSG_GETTABLE, GETCHAIN,
//     GETRULE and GETSET dumps on a NETLINK_NETFILTER socket, and GETSETELEM of each set, the
//     attributes parsed here with their lengths checked and bounded in count and bytes.
// Both need CAP_NET_ADMIN in the network namespace read; neither loads a kernel module or
// creates a table to read it (a table the namespace does not have is not asked for).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/host_firewall.h"

namespace ncclguard::probes {

// A malformed kernel answer (or a crafted buffer in tests): what was wrong, and where.
class NetfilterParseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Limits on what is read: a node with more is reported, not read in part.
inline constexpr std::size_t kMaxNetfilterBytes = 32u << 20;
inline constexpr std::size_t kMaxNetfilterRules = 100000;
inline constexpr std::size_t kMaxRuleExpressions = 256;
inline constexpr std::size_t kMaxNftSets = 1024;
inline constexpr std::size_t kMaxSetElements = 200000;  // of all sets together

// IPT_SO_GET_INFO's answer, as the parser needs it.
struct IptTableInfo {
  std::uint32_t valid_hooks = 0;
  std::array<std::uint32_t, 5> hook_entry{};
  std::array<std::uint32_t, 5> underflow{};
  std::uint32_t size = 0;
};

// The filter table from IPT_SO_GET_ENTRIES's entries (`entries`: entrytable, info.size bytes).
// Throws NetfilterParseError.
core::FirewallTable ParseIptEntries(std::span<const unsigned char> entries,
                                    const IptTableInfo& info);

// An x_tables match or target's data, as ip_tables and nftables' compat expressions carry it:
// adds the conditions it understands to `rule` and its iptables text to `text`.
void ApplyXtMatch(std::string_view name, std::span<const unsigned char> data, unsigned revision,
                  core::FirewallRule& rule, std::string& text);
void ApplyXtTarget(std::string_view name, std::span<const unsigned char> data,
                   core::FirewallRule& rule, std::string& text);

// "NEW,ESTABLISHED" (iptables) or "new,established" (nft) for a mask of core::kCt* bits.
std::string CtStateNames(std::uint32_t mask, bool upper_case);
// "tcp", "udp", or the number.
std::string ProtocolName(int protocol);

// nftables' dumps, accumulated message by message: tables, chains, rules, sets and the elements
// of each set (a dump of its own), so that a lookup of a port set or a verdict map is read.
class NftRuleset {
 public:
  // One datagram of a dump (several netlink messages). Returns true at its NLMSG_DONE. Throws
  // NetfilterParseError on a malformed message, a netlink error or a limit passed.
  bool Feed(std::span<const unsigned char> datagram);
  // The tables read so far, dormant ones left out, each chain's rules in order. Throws
  // NetfilterParseError on a rule whose expressions are malformed.
  std::vector<core::FirewallTable> Tables() const;
  std::size_t RuleCount() const { return rules_.size(); }

  struct SetName {
    int family = 0;
    std::string table;
    std::string name;
  };
  // The sets listed (NFT_MSG_GETSET), whose elements are asked for one dump each.
  std::vector<SetName> Sets() const;

  // One element: a key, or a range of keys, and for a map its data (a verdict).
  struct Element {
    std::vector<unsigned char> key;
    std::vector<unsigned char> key_end;  // set: the range's last key (NFTA_SET_ELEM_KEY_END)
    std::vector<unsigned char> data;     // the NFTA_SET_ELEM_DATA attribute, unparsed
    bool interval_end = false;           // NFT_SET_ELEM_INTERVAL_END: the key ends a range
  };
  struct Set {
    SetName name;
    std::uint32_t flags = 0;
    bool elements_read = false;
    std::vector<Element> elements;
  };

 private:
  struct Table {
    int family = 0;
    std::string name;
    bool dormant = false;
  };
  struct Chain {
    int family = 0;
    std::string table;
    std::string name;
    int hook = -1;
    bool policy_drop = false;
  };
  struct Expression {
    std::string name;
    std::vector<unsigned char> data;  // NFTA_EXPR_DATA's attributes
  };
  struct Rule {
    int family = 0;
    std::string table;
    std::string chain;
    std::vector<Expression> expressions;
  };
  void ParseTable(int family, std::span<const unsigned char> attributes);
  void ParseChain(int family, std::span<const unsigned char> attributes);
  void ParseRule(int family, std::span<const unsigned char> attributes);
  void ParseSet(int family, std::span<const unsigned char> attributes);
  void ParseSetElements(int family, std::span<const unsigned char> attributes);

  std::vector<Table> tables_;
  std::vector<Chain> chains_;
  std::vector<Rule> rules_;
  std::vector<Set> sets_;
  std::size_t bytes_ = 0;
  std::size_t elements_ = 0;
};

// What was read of one network namespace.
struct NetfilterRead {
  std::vector<core::FirewallTable> tables;
  std::vector<std::string> sources;  // "iptables-legacy filter: 12 rules", "nftables: 3 tables..."
  std::vector<std::string> errors;   // "nftables: reading rules: Operation not permitted"
  // net.ipv4.ip_local_port_range in that namespace, when it could be read.
  std::optional<core::PortRange> ephemeral_ports;
};

// Reads the rules of the current thread's network namespace.
NetfilterRead ReadNetfilter();

// Reads the rules of the network namespace `netns` (a /proc/<pid>/ns/net file), entered with
// setns on a thread of its own that does nothing else and ends after. Empty path: the calling
// thread's own namespace, read in place. Throws std::runtime_error when the namespace cannot be
// entered (no such file, no CAP_SYS_ADMIN).
NetfilterRead ReadNetfilterIn(const std::filesystem::path& netns);

}  // namespace ncclguard::probes
