// x_tables data: iptables-legacy's filter table (struct ipt_entry and its matches and target)
// and the same match and target structs inside nftables' compat expressions (iptables-nft).
#include <arpa/inet.h>
#include <linux/netfilter/x_tables.h>
#include <linux/netfilter/xt_comment.h>
#include <linux/netfilter/xt_conntrack.h>
#include <linux/netfilter/xt_multiport.h>
#include <linux/netfilter/xt_tcpudp.h>
#include <linux/netfilter_ipv4/ip_tables.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstddef>
#include <cstring>
#include <map>
#include <optional>

#include "probes/netfilter.h"

namespace ncclguard::probes {
namespace {

using core::FirewallRule;
using core::RuleVerdict;
using core::Tristate;

template <typename T>
T LoadAt(std::span<const unsigned char> bytes, std::size_t offset, std::string_view what) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T))
    throw NetfilterParseError(std::string(what) + ": " + std::to_string(sizeof(T)) +
                              " bytes at offset " + std::to_string(offset) + " past the end (" +
                              std::to_string(bytes.size()) + " bytes)");
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

// A NUL-padded name of at most `size` bytes.
std::string FixedString(std::span<const unsigned char> bytes, std::size_t offset,
                        std::size_t size) {
  if (offset > bytes.size()) return "";
  const std::size_t available = std::min(size, bytes.size() - offset);
  const auto* begin = reinterpret_cast<const char*>(bytes.data() + offset);
  return std::string(begin, strnlen(begin, available));
}

void Also(FirewallRule& rule, Tristate value, std::string_view why) {
  if (value < rule.other) {
    rule.other = value;
    if (value == Tristate::kMaybe && rule.not_understood.empty()) rule.not_understood = why;
  }
}

// The states a new connection's SYN is in: NEW only (not NATed, not untracked).
void ApplyStates(FirewallRule& rule, std::uint32_t mask, bool inverted) {
  constexpr std::uint32_t kAll = 0x1ff;
  const std::uint32_t states = inverted ? (~mask & kAll) : mask;
  if (states == 0) {
    Also(rule, Tristate::kNo, "");
    return;
  }
  rule.ct_states = rule.ct_states ? (rule.ct_states & states) : states;
  if (rule.ct_states == 0) Also(rule, Tristate::kNo, "");
}

std::string PortText(std::uint16_t first, std::uint16_t last) {
  return first == last ? std::to_string(first) : std::to_string(first) + ":" + std::to_string(last);
}

void ApplyTcp(std::span<const unsigned char> data, FirewallRule& rule, std::string& text) {
  const auto tcp = LoadAt<xt_tcp>(data, 0, "match tcp");
  text += " -m tcp";
  if (tcp.spts[0] != 0 || tcp.spts[1] != 0xffff) {
    text += std::string((tcp.invflags & XT_TCP_INV_SRCPT) ? " !" : "") + " --sport " +
            PortText(tcp.spts[0], tcp.spts[1]);
    Also(rule, Tristate::kMaybe, "a condition on the peer's source port");
  }
  if (tcp.dpts[0] != 0 || tcp.dpts[1] != 0xffff || (tcp.invflags & XT_TCP_INV_DSTPT)) {
    const bool negated = tcp.invflags & XT_TCP_INV_DSTPT;
    text += std::string(negated ? " !" : "") + " --dport " + PortText(tcp.dpts[0], tcp.dpts[1]);
    if (tcp.dpts[0] <= tcp.dpts[1])
      rule.dports.push_back({{{tcp.dpts[0], tcp.dpts[1]}}, negated, false});
    else
      Also(rule, negated ? Tristate::kYes : Tristate::kNo, "");  // an empty range
  }
  if (tcp.flg_mask != 0) {
    constexpr std::uint8_t kSyn = 0x02;
    const bool inverted = tcp.invflags & XT_TCP_INV_FLAGS;
    text += (tcp.flg_mask == 0x17 && tcp.flg_cmp == kSyn)
                ? std::string(inverted ? " ! --syn" : " --syn")
                : std::string(inverted ? " !" : "") + " --tcp-flags 0x" +
                      std::to_string(tcp.flg_mask) + " 0x" + std::to_string(tcp.flg_cmp);
    const bool syn_matches = ((kSyn & tcp.flg_mask) == tcp.flg_cmp) != inverted;
    Also(rule, syn_matches ? Tristate::kYes : Tristate::kNo, "");
  }
  if (tcp.option != 0) {
    text += " --tcp-option " + std::to_string(tcp.option);
    Also(rule, Tristate::kMaybe, "a condition on a TCP option");
  }
}

void ApplyConntrack(std::span<const unsigned char> data, unsigned revision, FirewallRule& rule,
                    std::string& text) {
  const auto flags =
      LoadAt<std::uint16_t>(data, offsetof(xt_conntrack_mtinfo1, match_flags), "match conntrack");
  const auto invert =
      LoadAt<std::uint16_t>(data, offsetof(xt_conntrack_mtinfo1, invert_flags), "match conntrack");
  const std::uint32_t state =
      revision == 1 ? LoadAt<std::uint8_t>(data, offsetof(xt_conntrack_mtinfo1, state_mask),
                                           "match conntrack")
                    : LoadAt<std::uint16_t>(data, offsetof(xt_conntrack_mtinfo2, state_mask),
                                            "match conntrack");
  text += " -m conntrack";
  if (flags & XT_CONNTRACK_STATE) {
    const bool inverted = invert & XT_CONNTRACK_STATE;
    text += std::string(inverted ? " !" : "") + " --ctstate " + CtStateNames(state, true);
    ApplyStates(rule, state, inverted);
  }
  if (flags & XT_CONNTRACK_PROTO) {
    const auto proto =
        LoadAt<std::uint16_t>(data, offsetof(xt_conntrack_mtinfo1, l4proto), "match conntrack");
    const bool inverted = invert & XT_CONNTRACK_PROTO;
    text += std::string(inverted ? " !" : "") + " --ctproto " + std::to_string(proto);
    Also(rule, ((proto == IPPROTO_TCP) != inverted) ? Tristate::kYes : Tristate::kNo, "");
  }
  if (flags & ~(XT_CONNTRACK_STATE | XT_CONNTRACK_PROTO | XT_CONNTRACK_STATE_ALIAS)) {
    text += " ...";
    Also(rule, Tristate::kMaybe, "a conntrack condition other than the state");
  }
}

void ApplyMultiport(std::span<const unsigned char> data, unsigned revision, FirewallRule& rule,
                    std::string& text) {
  if (revision != 1) {
    text += " -m multiport";
    Also(rule, Tristate::kMaybe, "multiport revision " + std::to_string(revision));
    return;
  }
  const auto multiport = LoadAt<xt_multiport_v1>(data, 0, "match multiport");
  const unsigned count = std::min<unsigned>(multiport.count, XT_MULTI_PORTS);
  std::vector<core::PortRange> ranges;
  std::string ports;
  for (unsigned i = 0; i < count; ++i) {
    const std::uint16_t first = multiport.ports[i];
    std::uint16_t last = first;
    if (multiport.pflags[i] && i + 1 < count) last = multiport.ports[++i];
    if (first <= last) ranges.push_back({first, last});
    ports += (ports.empty() ? "" : ",") + PortText(first, last);
  }
  const std::string negation = multiport.invert ? " !" : "";
  if (multiport.flags == XT_MULTIPORT_DESTINATION) {
    text += " -m multiport" + negation + " --dports " + ports;
    rule.dports.push_back({std::move(ranges), multiport.invert != 0, false});
  } else {
    text += " -m multiport" + negation +
            (multiport.flags == XT_MULTIPORT_SOURCE ? " --sports " : " --ports ") + ports;
    Also(rule, Tristate::kMaybe, "a condition on the peer's source port");
  }
}

std::string_view RejectWith(int with) {
  static constexpr std::string_view kNames[] = {"icmp-net-unreachable",   "icmp-host-unreachable",
                                                "icmp-proto-unreachable", "icmp-port-unreachable",
                                                "icmp-echo-reply",        "icmp-net-prohibited",
                                                "icmp-host-prohibited",   "tcp-reset",
                                                "icmp-admin-prohibited"};
  if (with < 0 || static_cast<std::size_t>(with) >= std::size(kNames)) return "?";
  return kNames[with];
}

bool IsNonTerminatingTarget(std::string_view name) {
  static constexpr std::string_view kNames[] = {
      "LOG",   "NFLOG",    "ULOG",    "MARK",       "CONNMARK",    "CT",   "NOTRACK",
      "TRACE", "CLASSIFY", "TCPMSS",  "AUDIT",      "CHECKSUM",    "DSCP", "TOS",
      "TTL",   "HL",       "SET",     "SECMARK",    "CONNSECMARK", "LED",  "IDLETIMER",
      "HMARK", "TEE",      "RATEEST", "TCPOPTSTRIP"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

std::string Ipv4Text(std::uint32_t address_be, std::uint32_t mask_be) {
  char buffer[INET_ADDRSTRLEN] = {};
  in_addr address{address_be};
  inet_ntop(AF_INET, &address, buffer, sizeof(buffer));
  return std::string(buffer) + "/" + std::to_string(std::popcount(ntohl(mask_be)));
}

std::string Interface(const char* name, const unsigned char* mask) {
  const std::string text(name, strnlen(name, IFNAMSIZ));
  // iptables' "eth+" leaves the mask short of the name's NUL.
  const bool wildcard = text.size() < IFNAMSIZ && mask[text.size()] == 0 && !text.empty() &&
                        mask[text.size() - 1] != 0;
  return wildcard ? text + "+" : text;
}

// -i or -o: a peer's SYN never comes in or goes out on lo; another interface may be the peers'.
void ApplyInterface(const std::string& name, bool inverted, std::string_view flag,
                    FirewallRule& rule, std::string& text) {
  text += std::string(inverted ? " ! " : " ") + std::string(flag) + " " + name;
  if (name == "lo")
    Also(rule, inverted ? Tristate::kYes : Tristate::kNo, "");
  else
    Also(rule, Tristate::kMaybe, "a condition on an interface (" + std::string(flag) + ")");
}

// ipt_ip: addresses, interfaces, protocol and fragments, for a SYN from a peer.
void ApplyIp(const ipt_ip& ip, FirewallRule& rule, std::string& text) {
  if (ip.smsk.s_addr != 0) {
    text += std::string((ip.invflags & IPT_INV_SRCIP) ? " !" : "") + " -s " +
            Ipv4Text(ip.src.s_addr, ip.smsk.s_addr);
  }
  if (ip.dmsk.s_addr != 0) {
    const bool inverted = ip.invflags & IPT_INV_DSTIP;
    text += std::string(inverted ? " !" : "") + " -d " + Ipv4Text(ip.dst.s_addr, ip.dmsk.s_addr);
    const std::uint32_t mask = ntohl(ip.dmsk.s_addr);
    const std::uint32_t network = ntohl(ip.dst.s_addr) & mask;
    // Within 127.0.0.0/8: never a peer's SYN to this node.
    if ((mask & 0xff000000u) == 0xff000000u && (network >> 24) == 127)
      Also(rule, inverted ? Tristate::kYes : Tristate::kNo, "");
    else
      Also(rule, Tristate::kMaybe, "a condition on the destination address");
  }
  if (ip.iniface[0] != '\0')
    ApplyInterface(Interface(ip.iniface, ip.iniface_mask), ip.invflags & IPT_INV_VIA_IN, "-i", rule,
                   text);
  if (ip.outiface[0] != '\0')
    ApplyInterface(Interface(ip.outiface, ip.outiface_mask), ip.invflags & IPT_INV_VIA_OUT, "-o",
                   rule, text);
  if (ip.proto != 0) {
    rule.protocol = ip.proto;
    rule.protocol_negated = ip.invflags & XT_INV_PROTO;
    text += std::string(rule.protocol_negated ? " !" : "") + " -p " + ProtocolName(ip.proto);
  }
  if (ip.flags & IPT_F_FRAG) {
    const bool inverted = ip.invflags & IPT_INV_FRAG;
    text += inverted ? " ! -f" : " -f";
    Also(rule, inverted ? Tristate::kYes : Tristate::kNo, "");  // a SYN is a first fragment
  }
}

}  // namespace

void ApplyXtMatch(std::string_view name, std::span<const unsigned char> data, unsigned revision,
                  FirewallRule& rule, std::string& text) {
  if (name == "tcp") {
    ApplyTcp(data, rule, text);
  } else if (name == "conntrack") {
    ApplyConntrack(data, revision, rule, text);
  } else if (name == "state") {
    const auto mask = LoadAt<std::uint32_t>(data, 0, "match state");
    text += " -m state --state " + CtStateNames(mask, true);
    ApplyStates(rule, mask, false);
  } else if (name == "multiport") {
    ApplyMultiport(data, revision, rule, text);
  } else if (name == "comment") {
    text += " -m comment --comment \"" + FixedString(data, 0, XT_MAX_COMMENT_LEN) + "\"";
  } else if (name == "udp" || name == "icmp" || name == "sctp") {
    // Only with -p of their own protocol: the rule's protocol already excludes TCP.
    text += " -m " + std::string(name) + " ...";
    if (rule.protocol == IPPROTO_TCP && !rule.protocol_negated) Also(rule, Tristate::kNo, "");
  } else {
    text += " -m " + std::string(name) + " ...";
    Also(rule, Tristate::kMaybe, "match '" + std::string(name) + "' is not understood");
  }
}

void ApplyXtTarget(std::string_view name, std::span<const unsigned char> data, FirewallRule& rule,
                   std::string& text) {
  if (name == "REJECT") {
    rule.verdict = RuleVerdict::kReject;
    text += " -j REJECT";
    if (data.size() >= sizeof(int))
      text += " --reject-with " + std::string(RejectWith(LoadAt<int>(data, 0, "target REJECT")));
  } else if (name == "DROP") {
    rule.verdict = RuleVerdict::kDrop;
    text += " -j DROP";
  } else if (name == "ACCEPT") {
    rule.verdict = RuleVerdict::kAccept;
    text += " -j ACCEPT";
  } else if (IsNonTerminatingTarget(name)) {
    text += " -j " + std::string(name);
  } else {
    rule.verdict = RuleVerdict::kUnknown;
    rule.not_understood = "target " + std::string(name) + " is not understood";
    text += " -j " + std::string(name);
  }
}

std::string CtStateNames(std::uint32_t mask, bool upper_case) {
  static constexpr std::pair<std::uint32_t, std::string_view> kNames[] = {
      {core::kCtInvalid, "INVALID"},         {core::kCtNew, "NEW"},
      {core::kCtEstablished, "ESTABLISHED"}, {core::kCtRelated, "RELATED"},
      {core::kCtUntracked, "UNTRACKED"},     {XT_CONNTRACK_STATE_SNAT, "SNAT"},
      {XT_CONNTRACK_STATE_DNAT, "DNAT"}};
  std::string text;
  for (const auto& [bit, name] : kNames)
    if (mask & bit) text += (text.empty() ? "" : ",") + std::string(name);
  if (!upper_case)
    for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string ProtocolName(int protocol) {
  switch (protocol) {
    case IPPROTO_TCP:
      return "tcp";
    case IPPROTO_UDP:
      return "udp";
    case IPPROTO_ICMP:
      return "icmp";
    case IPPROTO_SCTP:
      return "sctp";
    default:
      return std::to_string(protocol);
  }
}

core::FirewallTable ParseIptEntries(std::span<const unsigned char> entries,
                                    const IptTableInfo& info) {
  static constexpr std::string_view kHookNames[NF_INET_NUMHOOKS] = {
      "PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"};
  struct Entry {
    std::size_t offset = 0;
    FirewallRule rule;
    std::string error_name;  // an ERROR target: a user chain's head, or "ERROR" at the end
    int standard = 0;        // a standard target's verdict
    bool is_standard = false;
    bool is_goto = false;
  };
  if (info.size != entries.size())
    throw NetfilterParseError("entries: " + std::to_string(entries.size()) +
                              " bytes where the table's info says " + std::to_string(info.size));
  std::vector<Entry> parsed;
  for (std::size_t offset = 0; offset < entries.size();) {
    if (parsed.size() >= kMaxNetfilterRules)
      throw NetfilterParseError("entries: more than " + std::to_string(kMaxNetfilterRules));
    const std::string where = "entry at offset " + std::to_string(offset);
    const auto entry = LoadAt<ipt_entry>(entries, offset, where);
    if (entry.next_offset < sizeof(ipt_entry) || entry.next_offset > entries.size() - offset)
      throw NetfilterParseError(where + ": next_offset " + std::to_string(entry.next_offset) +
                                " out of bounds");
    if (entry.target_offset < sizeof(ipt_entry) ||
        entry.target_offset + sizeof(xt_entry_target) > entry.next_offset)
      throw NetfilterParseError(where + ": target_offset " + std::to_string(entry.target_offset) +
                                " out of bounds");
    const auto bytes = entries.subspan(offset, entry.next_offset);
    Entry result;
    result.offset = offset;
    std::string text;
    ApplyIp(entry.ip, result.rule, text);
    for (std::size_t at = sizeof(ipt_entry); at < entry.target_offset;) {
      const auto size = LoadAt<std::uint16_t>(bytes, at, where + ": match");
      if (size < sizeof(xt_entry_match) || size > entry.target_offset - at)
        throw NetfilterParseError(where + ": match at " + std::to_string(at) + ": size " +
                                  std::to_string(size) + " out of bounds");
      const std::string name =
          FixedString(bytes, at + offsetof(xt_entry_match, u.user.name), XT_EXTENSION_MAXNAMELEN);
      const auto revision = LoadAt<std::uint8_t>(
          bytes, at + offsetof(xt_entry_match, u.user.revision), where + ": match");
      ApplyXtMatch(name, bytes.subspan(at + sizeof(xt_entry_match), size - sizeof(xt_entry_match)),
                   revision, result.rule, text);
      at += size;
    }
    const std::size_t target_at = entry.target_offset;
    const auto target_size = LoadAt<std::uint16_t>(bytes, target_at, where + ": target");
    if (target_size < sizeof(xt_entry_target) || target_size > entry.next_offset - target_at)
      throw NetfilterParseError(where + ": target size " + std::to_string(target_size) +
                                " out of bounds");
    const std::string target = FixedString(
        bytes, target_at + offsetof(xt_entry_target, u.user.name), XT_EXTENSION_MAXNAMELEN);
    const auto data =
        bytes.subspan(target_at + sizeof(xt_entry_target), target_size - sizeof(xt_entry_target));
    if (target == XT_STANDARD_TARGET) {
      result.is_standard = true;
      result.standard = LoadAt<int>(data, 0, where + ": standard target");
      result.is_goto = entry.ip.flags & IPT_F_GOTO;
    } else if (target == XT_ERROR_TARGET) {
      result.error_name = FixedString(data, 0, XT_FUNCTION_MAXNAMELEN);
      if (result.error_name.empty()) result.error_name = XT_ERROR_TARGET;
    } else {
      ApplyXtTarget(target, data, result.rule, text);
    }
    result.rule.text = text.empty() ? text : text.substr(1);
    parsed.push_back(std::move(result));
    offset += entry.next_offset;
  }

  // Chains: a built-in one from its hook's entry to its underflow (the policy), a user chain
  // from the entry after its ERROR head to its closing RETURN.
  core::FirewallTable table;
  table.backend = core::FirewallBackend::kIptablesLegacy;
  table.family = "ip";
  table.name = "filter";
  std::map<std::size_t, std::string> chain_at;  // first entry's offset -> chain
  for (std::size_t i = 0; i < parsed.size(); ++i) {
    if (parsed[i].error_name.empty() || parsed[i].error_name == XT_ERROR_TARGET) continue;
    if (i + 1 < parsed.size()) chain_at[parsed[i + 1].offset] = parsed[i].error_name;
  }
  for (unsigned hook = 0; hook < NF_INET_NUMHOOKS; ++hook)
    if (info.valid_hooks & (1u << hook)) chain_at[info.hook_entry[hook]] = kHookNames[hook];

  constexpr std::size_t kNoChain = ~std::size_t{0};
  std::size_t chain = kNoChain;  // index in table.chains
  int hook_of_chain = -1;
  for (std::size_t i = 0; i < parsed.size(); ++i) {
    Entry& entry = parsed[i];
    if (!entry.error_name.empty()) {
      chain = kNoChain;
      continue;
    }
    if (auto it = chain_at.find(entry.offset); it != chain_at.end()) {
      hook_of_chain = -1;
      for (unsigned hook = 0; hook < NF_INET_NUMHOOKS; ++hook)
        if ((info.valid_hooks & (1u << hook)) && info.hook_entry[hook] == entry.offset)
          hook_of_chain = static_cast<int>(hook);
      chain = table.chains.size();
      table.chains.push_back({it->second,
                              hook_of_chain == NF_INET_LOCAL_IN,
                              hook_of_chain == NF_INET_FORWARD,
                              RuleVerdict::kAccept,
                              {}});
    }
    if (chain == kNoChain)
      throw NetfilterParseError("entry at offset " + std::to_string(entry.offset) +
                                ": in no chain");
    const bool underflow = hook_of_chain >= 0 && info.underflow[hook_of_chain] == entry.offset;
    if (underflow) {
      table.chains[chain].policy =
          entry.standard == -NF_DROP - 1 ? RuleVerdict::kDrop : RuleVerdict::kAccept;
      chain = kNoChain;
      continue;
    }
    FirewallRule& rule = entry.rule;
    std::string suffix;
    if (entry.is_standard) {
      const int verdict = entry.standard;
      if (verdict == -NF_ACCEPT - 1) {
        rule.verdict = RuleVerdict::kAccept;
        suffix = " -j ACCEPT";
      } else if (verdict == -NF_DROP - 1) {
        rule.verdict = RuleVerdict::kDrop;
        suffix = " -j DROP";
      } else if (verdict == XT_RETURN) {
        // A user chain's closing RETURN (unconditional, before the next head) is not a rule.
        const bool closing = hook_of_chain < 0 && i + 1 < parsed.size() &&
                             !parsed[i + 1].error_name.empty() && rule.text.empty() &&
                             rule.dports.empty() && rule.protocol < 0;
        if (closing) continue;
        rule.verdict = RuleVerdict::kReturn;
        suffix = " -j RETURN";
      } else if (verdict >= 0) {
        const auto target = chain_at.find(static_cast<std::size_t>(verdict));
        if (target != chain_at.end()) {
          rule.verdict = entry.is_goto ? RuleVerdict::kGoto : RuleVerdict::kJump;
          rule.target = target->second;
          suffix = (entry.is_goto ? " -g " : " -j ") + target->second;
        } else if (i + 1 < parsed.size() &&
                   parsed[i + 1].offset == static_cast<std::size_t>(verdict)) {
          suffix = "";  // a jump to the next entry: no verdict
        } else {
          rule.verdict = RuleVerdict::kUnknown;
          rule.not_understood = "a jump to offset " + std::to_string(verdict);
          suffix = " -j ?";
        }
      } else {
        rule.verdict = RuleVerdict::kUnknown;
        rule.not_understood = "verdict " + std::to_string(verdict) + " is not understood";
        suffix = " -j QUEUE";
      }
    }
    rule.text += rule.text.empty() && !suffix.empty() ? suffix.substr(1) : suffix;
    table.chains[chain].rules.push_back(std::move(rule));
  }
  return table;
}

}  // namespace ncclguard::probes
