// nftables' GETTABLE, GETCHAIN and GETRULE dumps: netlink messages of nested attributes, each
// length checked against what encloses it. A rule's expressions are run over registers for one
// SYN from a peer (core/host_firewall.h): what each register holds is known (the protocol, the
// conntrack state), the destination port (kept as a port condition), or not known.
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nf_tables_compat.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <tuple>

#include "probes/netfilter.h"

namespace ncclguard::probes {
namespace {

using core::FirewallRule;
using core::RuleVerdict;
using core::Tristate;
using Bytes = std::span<const unsigned char>;

constexpr std::size_t kMaxAttributes = 4096;  // at one level

// Calls `visit(type, payload)` for each attribute of `bytes`, in order.
void ForEachAttribute(Bytes bytes, std::string_view where,
                      const std::function<void(unsigned, Bytes)>& visit) {
  std::size_t count = 0;
  for (std::size_t at = 0; at < bytes.size();) {
    if (++count > kMaxAttributes)
      throw NetfilterParseError(std::string(where) + ": more than " +
                                std::to_string(kMaxAttributes) + " attributes");
    if (bytes.size() - at < sizeof(nlattr))
      throw NetfilterParseError(std::string(where) + ": " + std::to_string(bytes.size() - at) +
                                " trailing bytes, short of an attribute header");
    nlattr header;
    std::memcpy(&header, bytes.data() + at, sizeof(header));
    if (header.nla_len < sizeof(nlattr) || header.nla_len > bytes.size() - at)
      throw NetfilterParseError(std::string(where) + ": attribute length " +
                                std::to_string(header.nla_len) + " at offset " +
                                std::to_string(at) + " out of bounds (" +
                                std::to_string(bytes.size()) + " bytes)");
    visit(header.nla_type & NLA_TYPE_MASK,
          bytes.subspan(at + sizeof(nlattr), header.nla_len - sizeof(nlattr)));
    at += NLA_ALIGN(header.nla_len);
  }
}

std::uint32_t Be32(Bytes payload, std::string_view where) {
  if (payload.size() != sizeof(std::uint32_t))
    throw NetfilterParseError(std::string(where) + ": " + std::to_string(payload.size()) +
                              " bytes where a 32-bit value was expected");
  std::uint32_t value;
  std::memcpy(&value, payload.data(), sizeof(value));
  return ntohl(value);
}

std::string String(Bytes payload) {
  const auto* text = reinterpret_cast<const char*>(payload.data());
  return std::string(text, strnlen(text, payload.size()));
}

std::string FamilyName(int family) {
  switch (family) {
    case NFPROTO_IPV4:
      return "ip";
    case NFPROTO_INET:
      return "inet";
    case NFPROTO_IPV6:
      return "ip6";
    case NFPROTO_ARP:
      return "arp";
    case NFPROTO_BRIDGE:
      return "bridge";
    case NFPROTO_NETDEV:
      return "netdev";
    default:
      return std::to_string(family);
  }
}

// NFTA_DATA_VALUE's bytes, or the verdict of NFTA_DATA_VERDICT.
struct Data {
  std::vector<unsigned char> value;
  bool is_verdict = false;
  int verdict = 0;
  std::string chain;
};

Data ParseData(Bytes payload, std::string_view where) {
  Data data;
  ForEachAttribute(payload, where, [&](unsigned type, Bytes inner) {
    if (type == NFTA_DATA_VALUE) {
      if (inner.size() > NFT_DATA_VALUE_MAXLEN)
        throw NetfilterParseError(std::string(where) + ": a value of " +
                                  std::to_string(inner.size()) + " bytes");
      data.value.assign(inner.begin(), inner.end());
    } else if (type == NFTA_DATA_VERDICT) {
      data.is_verdict = true;
      ForEachAttribute(inner, where, [&](unsigned verdict_type, Bytes verdict) {
        if (verdict_type == NFTA_VERDICT_CODE)
          data.verdict = static_cast<int>(Be32(verdict, std::string(where) + ": verdict code"));
        else if (verdict_type == NFTA_VERDICT_CHAIN)
          data.chain = String(verdict);
      });
    }
  });
  return data;
}

// What a register holds for the SYN.
struct Register {
  enum Kind { kUnknown, kKnown, kDport, kDaddr, kPeer, kInterfaceName, kInterfaceIndex };
  Kind kind = kUnknown;
  std::vector<unsigned char> value;                          // kKnown
  std::uint32_t daddr_mask = 0xffffffff;                     // kDaddr, host order
  std::string name;                                          // "tcp dport", for the rule's text
  std::string why = "an expression that is not understood";  // kUnknown
  std::string mask_text;  // a bitwise mask on it, for the text: "established,related"
};

Register MakeRegister(Register::Kind kind, std::vector<unsigned char> value, std::string name,
                      std::string why) {
  Register reg;
  reg.kind = kind;
  reg.value = std::move(value);
  reg.name = std::move(name);
  reg.why = std::move(why);
  return reg;
}

// The 32-bit slot a register number names (NFT_REG_1..4 are 16 bytes, NFT_REG32_* 4).
std::uint32_t RegisterSlot(std::uint32_t reg) {
  return reg <= NFT_REG_4 ? reg * 4 : reg - NFT_REG32_00 + 4;
}

std::string HexText(const std::vector<unsigned char>& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text = "0x";
  for (unsigned char byte : bytes) {
    text += kDigits[byte >> 4];
    text += kDigits[byte & 15];
  }
  return text;
}

std::uint32_t BigEndian(const std::vector<unsigned char>& bytes) {
  std::uint32_t value = 0;
  for (std::size_t i = 0; i < bytes.size() && i < 4; ++i) value = (value << 8) | bytes[i];
  return value;
}

std::uint32_t HostOrder32(const std::vector<unsigned char>& bytes) {
  std::uint32_t value = 0;
  std::memcpy(&value, bytes.data(), std::min<std::size_t>(bytes.size(), sizeof(value)));
  return value;
}

// How a compared value reads in the rule's text, by what the register holds.
std::string ValueText(const Register& reg, const std::vector<unsigned char>& value) {
  if (reg.name == "meta l4proto" || reg.name == "ip protocol")
    return ProtocolName(static_cast<int>(BigEndian(value)));
  if (reg.name == "meta nfproto")
    return value.size() == 1 && value[0] == NFPROTO_IPV4   ? "ipv4"
           : value.size() == 1 && value[0] == NFPROTO_IPV6 ? "ipv6"
                                                           : HexText(value);
  if (reg.name == "ct state") return CtStateNames(HostOrder32(value), false);
  if (reg.kind == Register::kDport) return std::to_string(BigEndian(value));
  if (reg.kind == Register::kInterfaceName) return "\"" + String(value) + "\"";
  if ((reg.kind == Register::kDaddr || reg.kind == Register::kPeer) && !value.empty() &&
      value.size() <= 4) {
    // iptables-nft loads only a prefix's whole bytes: 10.0.0.0/8 is one byte, 10.
    unsigned char bytes[4] = {};
    std::memcpy(bytes, value.data(), value.size());
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, bytes, text, sizeof(text));
    std::string address = text;
    const int prefix = reg.kind == Register::kDaddr && reg.daddr_mask != 0xffffffff
                           ? __builtin_popcount(reg.daddr_mask)
                           : static_cast<int>(value.size() * 8);
    if (prefix != 32) address += "/" + std::to_string(prefix);
    return address;
  }
  return HexText(value);
}

std::string OpText(std::uint32_t op) {
  switch (op) {
    case NFT_CMP_EQ:
      return "";
    case NFT_CMP_NEQ:
      return "!= ";
    case NFT_CMP_LT:
      return "< ";
    case NFT_CMP_LTE:
      return "<= ";
    case NFT_CMP_GT:
      return "> ";
    default:
      return ">= ";
  }
}

Tristate Compare(int order, std::uint32_t op) {
  bool result = false;
  switch (op) {
    case NFT_CMP_EQ:
      result = order == 0;
      break;
    case NFT_CMP_NEQ:
      result = order != 0;
      break;
    case NFT_CMP_LT:
      result = order < 0;
      break;
    case NFT_CMP_LTE:
      result = order <= 0;
      break;
    case NFT_CMP_GT:
      result = order > 0;
      break;
    case NFT_CMP_GTE:
      result = order >= 0;
      break;
    default:
      return Tristate::kMaybe;
  }
  return result ? Tristate::kYes : Tristate::kNo;
}

// Builds one rule from its expressions.
// A set's elements as ranges of keys (first and last inclusive), each with a map's verdict.
struct SetRange {
  std::vector<unsigned char> first;
  std::vector<unsigned char> last;
  Data data;
};

// key - 1, big-endian, for the end of an interval set's range (its end element is exclusive).
std::vector<unsigned char> Decrement(std::vector<unsigned char> key) {
  for (auto it = key.rbegin(); it != key.rend(); ++it)
    if ((*it)-- != 0) break;
  return key;
}

int CompareKeys(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return std::memcmp(a.data(), b.data(), a.size());
}

std::vector<SetRange> RangesOf(const NftRuleset::Set& set) {
  std::vector<SetRange> ranges;
  const auto data_of = [](const NftRuleset::Element& element) {
    return element.data.empty() ? Data{} : ParseData(element.data, "set element data");
  };
  if (!(set.flags & NFT_SET_INTERVAL)) {
    for (const auto& element : set.elements)
      ranges.push_back(
          {element.key, element.key_end.empty() ? element.key : element.key_end, data_of(element)});
    std::stable_sort(ranges.begin(), ranges.end(), [](const SetRange& a, const SetRange& b) {
      return CompareKeys(a.first, b.first) < 0;  // in order, as nft lists them
    });
    return ranges;
  }
  // An interval set lists each range's first key, and the key after its last as an end element
  // (or, with NFTA_SET_ELEM_KEY_END, both in one element).
  std::vector<const NftRuleset::Element*> sorted;
  for (const auto& element : set.elements) sorted.push_back(&element);
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) {
    const int order = CompareKeys(a->key, b->key);
    return order != 0 ? order < 0 : a->interval_end && !b->interval_end;
  });
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const auto& element = *sorted[i];
    if (element.interval_end) continue;
    if (!element.key_end.empty()) {
      ranges.push_back({element.key, element.key_end, data_of(element)});
      continue;
    }
    std::vector<unsigned char> last(element.key.size(), 0xff);
    for (std::size_t j = i + 1; j < sorted.size(); ++j)
      if (sorted[j]->interval_end) {
        last = Decrement(sorted[j]->key);
        break;
      }
    ranges.push_back({element.key, last, data_of(element)});
  }
  return ranges;
}

using SetResolver = std::function<const NftRuleset::Set*(const std::string&)>;

class RuleBuilder {
 public:
  RuleBuilder(FirewallRule& rule, SetResolver sets) : rule_(rule), sets_(std::move(sets)) {}

  void Expression(const std::string& name, Bytes data) {
    std::map<unsigned, Bytes> attributes;
    ForEachAttribute(data, "expression " + name,
                     [&](unsigned type, Bytes payload) { attributes[type] = payload; });
    const auto u32 = [&](unsigned type) -> std::optional<std::uint32_t> {
      const auto it = attributes.find(type);
      if (it == attributes.end()) return std::nullopt;
      return Be32(it->second, "expression " + name);
    };
    const auto data_of = [&](unsigned type) -> Data {
      const auto it = attributes.find(type);
      if (it == attributes.end()) return {};
      return ParseData(it->second, "expression " + name);
    };
    if (name == "meta") {
      Meta(u32(NFTA_META_KEY), u32(NFTA_META_DREG));
    } else if (name == "payload") {
      Payload(u32(NFTA_PAYLOAD_DREG), u32(NFTA_PAYLOAD_BASE), u32(NFTA_PAYLOAD_OFFSET),
              u32(NFTA_PAYLOAD_LEN));
    } else if (name == "ct") {
      Ct(u32(NFTA_CT_KEY), u32(NFTA_CT_DREG));
    } else if (name == "cmp") {
      Cmp(u32(NFTA_CMP_SREG).value_or(0), u32(NFTA_CMP_OP).value_or(NFT_CMP_EQ),
          data_of(NFTA_CMP_DATA).value);
    } else if (name == "range") {
      Range(u32(NFTA_RANGE_SREG).value_or(0), u32(NFTA_RANGE_OP).value_or(NFT_RANGE_EQ),
            data_of(NFTA_RANGE_FROM_DATA).value, data_of(NFTA_RANGE_TO_DATA).value);
    } else if (name == "bitwise") {
      Bitwise(u32(NFTA_BITWISE_SREG).value_or(0), u32(NFTA_BITWISE_DREG).value_or(0),
              u32(NFTA_BITWISE_OP).value_or(NFT_BITWISE_BOOL), data_of(NFTA_BITWISE_MASK).value,
              data_of(NFTA_BITWISE_XOR).value);
    } else if (name == "lookup") {
      const auto set = attributes.find(NFTA_LOOKUP_SET);
      Lookup(set == attributes.end() ? "?" : String(set->second), u32(NFTA_LOOKUP_SREG).value_or(0),
             u32(NFTA_LOOKUP_DREG), u32(NFTA_LOOKUP_FLAGS).value_or(0) & NFT_LOOKUP_F_INV);
    } else if (name == "immediate") {
      Immediate(u32(NFTA_IMMEDIATE_DREG).value_or(0), data_of(NFTA_IMMEDIATE_DATA));
    } else if (name == "reject") {
      Reject(u32(NFTA_REJECT_TYPE),
             attributes.contains(NFTA_REJECT_ICMP_CODE)
                 ? std::optional<unsigned>(attributes[NFTA_REJECT_ICMP_CODE].empty()
                                               ? 0
                                               : attributes[NFTA_REJECT_ICMP_CODE][0])
                 : std::nullopt);
    } else if (name == "match" || name == "target") {
      Compat(name, attributes);
    } else if (name == "counter" || name == "log" || name == "notrack" || name == "last" ||
               name == "dynset" || name == "objref" || name == "nat" || name == "masq" ||
               name == "redir" || name == "dup") {
      Text(name == "dynset" ? "update @set" : name == "objref" ? "counter name" : name);
    } else {
      // limit, quota, fib, socket, exthdr, ...: a condition or verdict not understood.
      Text(name + " ...");
      Maybe("expression '" + name + "' is not understood");
    }
  }

  // The rule, or one rule a port of a verdict map keyed by the destination port.
  std::vector<FirewallRule> Finish() {
    std::string text;
    for (const std::string& token : tokens_) {
      if (token == kHiddenL4proto) continue;
      text += (text.empty() ? "" : " ") + token;
    }
    rule_.text = text;
    if (port_map_.empty()) return {rule_};
    std::vector<FirewallRule> rules;
    for (const auto& [range, data] : port_map_) {
      FirewallRule variant = rule_;
      variant.dports.push_back({{range}, false, false});
      ApplyVerdict(variant, data);
      rules.push_back(std::move(variant));
    }
    return rules;
  }

 private:
  static constexpr std::string_view kHiddenL4proto = "\x01";

  void Text(std::string token) { tokens_.push_back(std::move(token)); }
  void Also(Tristate value) { rule_.other = std::min(rule_.other, value); }
  void Maybe(std::string why) {
    if (rule_.other == Tristate::kYes) {
      rule_.other = Tristate::kMaybe;
      rule_.not_understood = std::move(why);
    }
  }
  void Load(std::optional<std::uint32_t> dreg, Register reg) {
    if (dreg) registers_[RegisterSlot(*dreg)] = std::move(reg);
  }
  Register& At(std::uint32_t reg) { return registers_[RegisterSlot(reg)]; }

  void Meta(std::optional<std::uint32_t> key, std::optional<std::uint32_t> dreg) {
    if (!dreg) {  // meta ... set: a statement
      Text("meta set");
      return;
    }
    Register reg;
    switch (key.value_or(~0u)) {
      case NFT_META_L4PROTO:
        reg = MakeRegister(Register::kKnown, {IPPROTO_TCP}, "meta l4proto", "");
        break;
      case NFT_META_NFPROTO:
        reg = MakeRegister(Register::kKnown, {NFPROTO_IPV4}, "meta nfproto", "");
        break;
      case NFT_META_PROTOCOL:
        reg = MakeRegister(Register::kKnown, {0x08, 0x00}, "meta protocol", "");
        break;
      case NFT_META_IIFNAME:
        reg = MakeRegister(Register::kInterfaceName, {}, "iifname", "");
        break;
      case NFT_META_IIF:
        reg = MakeRegister(Register::kInterfaceIndex, {}, "iif", "");
        break;
      case NFT_META_OIFNAME:
        reg = MakeRegister(Register::kInterfaceName, {}, "oifname", "");
        break;
      case NFT_META_OIF:
        reg = MakeRegister(Register::kInterfaceIndex, {}, "oif", "");
        break;
      default:
        reg = MakeRegister(Register::kUnknown, {}, "meta " + std::to_string(key.value_or(0)),
                           "a meta condition (key " + std::to_string(key.value_or(0)) + ")");
    }
    if (reg.name == "meta l4proto") last_l4proto_at_ = tokens_.size();
    Load(dreg, std::move(reg));
  }

  void Payload(std::optional<std::uint32_t> dreg, std::optional<std::uint32_t> base,
               std::optional<std::uint32_t> offset, std::optional<std::uint32_t> len) {
    if (!dreg) {
      Text("payload set");
      return;
    }
    const std::uint32_t b = base.value_or(~0u), o = offset.value_or(~0u), l = len.value_or(0);
    Register reg = MakeRegister(Register::kUnknown, {}, "@payload", "a payload condition");
    if (b == NFT_PAYLOAD_NETWORK_HEADER && o == 9 && l == 1) {
      reg = MakeRegister(Register::kKnown, {IPPROTO_TCP}, "ip protocol", "");
    } else if (b == NFT_PAYLOAD_NETWORK_HEADER && o == 12 && l >= 1 && l <= 4) {
      reg = MakeRegister(Register::kPeer, {}, "ip saddr", "");
    } else if (b == NFT_PAYLOAD_NETWORK_HEADER && o == 16 && l >= 1 && l <= 4) {
      reg = MakeRegister(Register::kDaddr, {}, "ip daddr", "");
      if (l < 4) reg.daddr_mask = ~0u << (32 - 8 * l);  // a prefix of whole bytes
    } else if (b == NFT_PAYLOAD_TRANSPORT_HEADER && o == 2 && l == 2) {
      reg = MakeRegister(Register::kDport, {}, Transport() + " dport", "");
    } else if (b == NFT_PAYLOAD_TRANSPORT_HEADER && o == 13 && l == 1) {
      reg = MakeRegister(Register::kKnown, {0x02}, "tcp flags", "");  // SYN
    } else if (b == NFT_PAYLOAD_TRANSPORT_HEADER && o == 0 && l == 2) {
      reg = MakeRegister(Register::kUnknown, {}, Transport() + " sport",
                         "a condition on the source port");
    }
    Load(dreg, std::move(reg));
  }

  // "tcp" after `meta l4proto tcp` (hidden then, as nft lists it), else "th".
  std::string Transport() {
    if (last_l4proto_at_ && *last_l4proto_at_ < tokens_.size() &&
        tokens_[*last_l4proto_at_] == "meta l4proto tcp") {
      tokens_[*last_l4proto_at_] = std::string(kHiddenL4proto);
      return "tcp";
    }
    return "th";
  }

  void Ct(std::optional<std::uint32_t> key, std::optional<std::uint32_t> dreg) {
    if (!dreg) {
      Text("ct set");
      return;
    }
    Register reg;
    const std::uint32_t new_state = core::kCtNew;
    std::vector<unsigned char> state(sizeof(new_state));
    std::memcpy(state.data(), &new_state, sizeof(new_state));
    switch (key.value_or(~0u)) {
      case NFT_CT_STATE:
        reg = MakeRegister(Register::kKnown, state, "ct state", "");
        break;
      case NFT_CT_DIRECTION:
        reg = MakeRegister(Register::kKnown, {0}, "ct direction", "");
        break;
      // A SYN's new connection is not NATed, expected or confirmed yet.
      case NFT_CT_STATUS:
        reg = MakeRegister(Register::kKnown, {0, 0, 0, 0}, "ct status", "");
        break;
      default:
        reg = MakeRegister(Register::kUnknown, {}, "ct " + std::to_string(key.value_or(0)),
                           "a conntrack condition (key " + std::to_string(key.value_or(0)) + ")");
    }
    Load(dreg, std::move(reg));
  }

  void Cmp(std::uint32_t sreg, std::uint32_t op, const std::vector<unsigned char>& value) {
    const Register& reg = At(sreg);
    const bool zero = std::all_of(value.begin(), value.end(), [](unsigned char b) { return !b; });
    if (!reg.mask_text.empty() && zero && (op == NFT_CMP_EQ || op == NFT_CMP_NEQ)) {
      Text(reg.name + (op == NFT_CMP_NEQ ? " " : " != ") + reg.mask_text);  // ct state new
    } else if (!reg.mask_text.empty()) {
      Text(reg.name + " " + reg.mask_text + (op == NFT_CMP_EQ ? " == " : " " + OpText(op)) +
           ValueText(reg, value));  // tcp flags & 0x12 == 0x02
    } else if (op == NFT_CMP_LTE && lower_bound_ && lower_bound_->first == RegisterSlot(sreg) &&
               lower_bound_->second + 1 == tokens_.size()) {
      // nft writes a range as >= and <=: listed as nft lists it, "tcp dport 32768-60999".
      tokens_.back() = reg.name + " " + lower_bound_text_ + "-" + ValueText(reg, value);
    } else {
      Text(reg.name + " " + OpText(op) + ValueText(reg, value));
    }
    lower_bound_.reset();
    if (op == NFT_CMP_GTE) {
      lower_bound_ = std::make_pair(RegisterSlot(sreg), tokens_.size() - 1);
      lower_bound_text_ = ValueText(reg, value);
    }
    switch (reg.kind) {
      case Register::kKnown: {
        const std::size_t n = std::min(reg.value.size(), value.size());
        int order = std::memcmp(reg.value.data(), value.data(), n);
        if (order == 0 && reg.value.size() != value.size())
          order = reg.value.size() < value.size() ? -1 : 1;
        Also(Compare(order, op));
        break;
      }
      case Register::kDport: {
        if (value.size() != 2) {
          Maybe("a port compared with " + std::to_string(value.size()) + " bytes");
          break;
        }
        const auto port = static_cast<std::uint16_t>(BigEndian(value));
        core::PortCondition condition;
        switch (op) {
          case NFT_CMP_EQ:
            condition.ranges = {{port, port}};
            break;
          case NFT_CMP_NEQ:
            condition = {{{port, port}}, true, false};
            break;
          case NFT_CMP_LT:
            if (port == 0) return Also(Tristate::kNo);
            condition.ranges = {{0, static_cast<std::uint16_t>(port - 1)}};
            break;
          case NFT_CMP_LTE:
            condition.ranges = {{0, port}};
            break;
          case NFT_CMP_GT:
            if (port == 0xffff) return Also(Tristate::kNo);
            condition.ranges = {{static_cast<std::uint16_t>(port + 1), 0xffff}};
            break;
          default:
            condition.ranges = {{port, 0xffff}};
        }
        rule_.dports.push_back(std::move(condition));
        break;
      }
      case Register::kDaddr:
        // Within 127.0.0.0/8: never a peer's SYN to this node.
        if ((reg.daddr_mask & 0xff000000u) == 0xff000000u && !value.empty() && value[0] == 127 &&
            (op == NFT_CMP_EQ || op == NFT_CMP_NEQ))
          Also(op == NFT_CMP_EQ ? Tristate::kNo : Tristate::kYes);
        else
          Maybe("a condition on the destination address");
        break;
      case Register::kInterfaceName:
        if (String(value) == "lo" && (op == NFT_CMP_EQ || op == NFT_CMP_NEQ))
          Also(op == NFT_CMP_EQ ? Tristate::kNo : Tristate::kYes);
        else
          Maybe("a condition on the interface");
        break;
      case Register::kInterfaceIndex:
        if (value.size() == 4 && HostOrder32(value) == 1 && (op == NFT_CMP_EQ || op == NFT_CMP_NEQ))
          Also(op == NFT_CMP_EQ ? Tristate::kNo : Tristate::kYes);  // 1 is lo
        else
          Maybe("a condition on the interface");
        break;
      case Register::kPeer:
        break;  // taken to hold for the training peers
      case Register::kUnknown:
        Maybe(reg.why);
        break;
    }
  }

  void Range(std::uint32_t sreg, std::uint32_t op, const std::vector<unsigned char>& from,
             const std::vector<unsigned char>& to) {
    const Register& reg = At(sreg);
    const bool negated = op == NFT_RANGE_NEQ;
    Text(reg.name + (negated ? " != " : " ") + ValueText(reg, from) + "-" + ValueText(reg, to));
    if (reg.kind == Register::kDport && from.size() == 2 && to.size() == 2) {
      const auto first = static_cast<std::uint16_t>(BigEndian(from));
      const auto last = static_cast<std::uint16_t>(BigEndian(to));
      if (first <= last)
        rule_.dports.push_back({{{first, last}}, negated, false});
      else
        Also(negated ? Tristate::kYes : Tristate::kNo);
    } else if (reg.kind == Register::kKnown && from.size() == reg.value.size() &&
               to.size() == reg.value.size()) {
      const bool in = std::memcmp(reg.value.data(), from.data(), from.size()) >= 0 &&
                      std::memcmp(reg.value.data(), to.data(), to.size()) <= 0;
      Also(in != negated ? Tristate::kYes : Tristate::kNo);
    } else if (reg.kind != Register::kPeer) {
      Maybe(reg.kind == Register::kUnknown ? reg.why : "a range on " + reg.name);
    }
  }

  void Bitwise(std::uint32_t sreg, std::uint32_t dreg, std::uint32_t op,
               const std::vector<unsigned char>& mask, const std::vector<unsigned char>& xor_) {
    Register reg = At(sreg);
    if (op != NFT_BITWISE_BOOL) {
      reg = MakeRegister(Register::kUnknown, {}, reg.name, "a shift of " + reg.name);
    } else if (reg.kind == Register::kKnown && mask.size() == reg.value.size() &&
               xor_.size() == reg.value.size()) {
      for (std::size_t i = 0; i < mask.size(); ++i)
        reg.value[i] = static_cast<unsigned char>((reg.value[i] & mask[i]) ^ xor_[i]);
      reg.mask_text =
          reg.name == "ct state" ? CtStateNames(HostOrder32(mask), false) : "& " + HexText(mask);
    } else if (reg.kind == Register::kDaddr && mask.size() == 4) {
      reg.daddr_mask = BigEndian(mask);
    } else if (reg.kind != Register::kPeer) {
      reg = MakeRegister(Register::kUnknown, {}, reg.name, "a mask on " + reg.name);
    }
    registers_[RegisterSlot(dreg)] = std::move(reg);
  }

  void Lookup(const std::string& name, std::uint32_t sreg, std::optional<std::uint32_t> dreg,
              bool inverted) {
    const Register& reg = At(sreg);
    const NftRuleset::Set* set = sets_ ? sets_(name) : nullptr;
    const std::vector<SetRange> ranges =
        set && set->elements_read ? RangesOf(*set) : std::vector<SetRange>{};
    const std::string shown = SetText(reg, name, set, ranges);
    const bool readable = set && set->elements_read;
    if (dreg && *dreg == NFT_REG_VERDICT) {
      Text(reg.name + " vmap " + shown);
      if (readable && reg.kind == Register::kKnown) {
        for (const SetRange& range : ranges)
          if (CompareKeys(range.first, reg.value) <= 0 && CompareKeys(reg.value, range.last) <= 0)
            ApplyVerdict(rule_, range.data);  // none: no verdict, the next rule
      } else if (readable && reg.kind == Register::kDport) {
        for (const SetRange& range : ranges)
          if (range.first.size() == 2 && range.last.size() == 2)
            port_map_.push_back({{static_cast<std::uint16_t>(BigEndian(range.first)),
                                  static_cast<std::uint16_t>(BigEndian(range.last))},
                                 range.data});
      } else {
        rule_.verdict = RuleVerdict::kUnknown;
        rule_.not_understood =
            readable ? "a verdict map on " + reg.name : "verdict map @" + name + " is not read";
      }
      return;
    }
    Text(reg.name + (inverted ? " != " : " ") + shown);
    if (dreg)
      registers_[RegisterSlot(*dreg)] =
          MakeRegister(Register::kUnknown, {}, "map @" + name, "a map");
    if (reg.kind == Register::kPeer) return;
    if (!readable) {
      if (reg.kind == Register::kDport)
        rule_.dports.push_back({{}, inverted, true});
      else
        Maybe("set @" + name + " is not read");
      return;
    }
    if (reg.kind == Register::kDport) {
      core::PortCondition condition{{}, inverted, false};
      for (const SetRange& range : ranges)
        if (range.first.size() == 2 && range.last.size() == 2)
          condition.ranges.push_back({static_cast<std::uint16_t>(BigEndian(range.first)),
                                      static_cast<std::uint16_t>(BigEndian(range.last))});
      rule_.dports.push_back(std::move(condition));
    } else if (reg.kind == Register::kKnown) {
      const bool in = std::any_of(ranges.begin(), ranges.end(), [&](const SetRange& range) {
        return CompareKeys(range.first, reg.value) <= 0 && CompareKeys(reg.value, range.last) <= 0;
      });
      Also(in != inverted ? Tristate::kYes : Tristate::kNo);
    } else {
      Maybe(reg.kind == Register::kUnknown ? reg.why : "a set of " + reg.name);
    }
  }

  // "{ 29400, 29500 }" for a small anonymous set, as nft lists it; "@name" otherwise.
  static std::string SetText(const Register& reg, const std::string& name,
                             const NftRuleset::Set* set, const std::vector<SetRange>& ranges) {
    constexpr std::size_t kShown = 8;
    if (!set || !name.starts_with("__") || ranges.empty() || ranges.size() > kShown)
      return "@" + name;
    std::string text;
    for (const SetRange& range : ranges) {
      text += text.empty() ? "{ " : ", ";
      text += ValueText(reg, range.first);
      if (range.last != range.first) text += "-" + ValueText(reg, range.last);
      if (range.data.is_verdict) text += " : " + VerdictText(range.data);
    }
    return text + " }";
  }

  static std::string VerdictText(const Data& data) {
    switch (data.verdict) {
      case NF_ACCEPT:
        return "accept";
      case NF_DROP:
        return "drop";
      case NFT_CONTINUE:
        return "continue";
      case NFT_RETURN:
        return "return";
      case NFT_JUMP:
        return "jump " + data.chain;
      case NFT_GOTO:
        return "goto " + data.chain;
      default:
        return "queue";
    }
  }

  static void ApplyVerdict(FirewallRule& rule, const Data& data) {
    if (!data.is_verdict) {
      rule.verdict = RuleVerdict::kUnknown;
      rule.not_understood = "a map's data is not a verdict";
      return;
    }
    switch (data.verdict) {
      case NF_ACCEPT:
        rule.verdict = RuleVerdict::kAccept;
        break;
      case NF_DROP:
        rule.verdict = RuleVerdict::kDrop;
        break;
      case NFT_CONTINUE:
      case NFT_BREAK:
        break;
      case NFT_RETURN:
        rule.verdict = RuleVerdict::kReturn;
        break;
      case NFT_JUMP:
      case NFT_GOTO:
        rule.verdict = data.verdict == NFT_JUMP ? RuleVerdict::kJump : RuleVerdict::kGoto;
        rule.target = data.chain;
        break;
      default:
        rule.verdict = RuleVerdict::kUnknown;
        rule.not_understood = "verdict " + std::to_string(data.verdict) + " is not understood";
    }
  }

  void Immediate(std::uint32_t dreg, const Data& data) {
    if (dreg != NFT_REG_VERDICT) {
      registers_[RegisterSlot(dreg)] =
          MakeRegister(Register::kKnown, data.value, HexText(data.value), "");
      return;
    }
    ApplyVerdict(rule_, data);
    if (data.verdict != NFT_BREAK) Text(VerdictText(data));
  }

  void Reject(std::optional<std::uint32_t> type, std::optional<unsigned> code) {
    rule_.verdict = RuleVerdict::kReject;
    // Code names as nft lists them (ICMPX: nf_tables.h; ICMP: the destination-unreachable codes).
    static const std::map<unsigned, std::string_view> kIcmpx = {
        {0, "no-route"}, {1, "port-unreachable"}, {2, "host-unreachable"}, {3, "admin-prohibited"}};
    static const std::map<unsigned, std::string_view> kIcmp = {
        {0, "net-unreachable"},  {1, "host-unreachable"}, {2, "prot-unreachable"},
        {3, "port-unreachable"}, {9, "net-prohibited"},   {10, "host-prohibited"},
        {13, "admin-prohibited"}};
    const auto name = [&](const auto& names) {
      const auto it = names.find(code.value_or(0));
      return it == names.end() ? std::to_string(code.value_or(0)) : std::string(it->second);
    };
    if (type == NFT_REJECT_TCP_RST)
      Text("reject with tcp reset");
    else if (type == NFT_REJECT_ICMPX_UNREACH)
      Text("reject with icmpx " + name(kIcmpx));
    else
      Text(code ? "reject with icmp " + name(kIcmp) : "reject");
  }

  void Compat(const std::string& kind, std::map<unsigned, Bytes>& attributes) {
    static_assert(int{NFTA_MATCH_NAME} == int{NFTA_TARGET_NAME} &&
                  int{NFTA_MATCH_INFO} == int{NFTA_TARGET_INFO} &&
                  int{NFTA_MATCH_REV} == int{NFTA_TARGET_REV});
    const std::string name =
        attributes.contains(NFTA_MATCH_NAME) ? String(attributes[NFTA_MATCH_NAME]) : "?";
    const std::uint32_t revision =
        attributes.contains(NFTA_MATCH_REV) ? Be32(attributes[NFTA_MATCH_REV], kind) : 0;
    const Bytes info = attributes.contains(NFTA_MATCH_INFO) ? attributes[NFTA_MATCH_INFO] : Bytes{};
    std::string text;
    if (kind == "match")
      ApplyXtMatch(name, info, revision, rule_, text);
    else
      ApplyXtTarget(name, info, rule_, text);
    Text(text.empty() ? text : text.substr(1));
  }

  FirewallRule& rule_;
  SetResolver sets_;
  std::vector<std::pair<core::PortRange, Data>> port_map_;  // a verdict map on the port
  std::map<std::uint32_t, Register> registers_;
  std::vector<std::string> tokens_;
  std::optional<std::size_t> last_l4proto_at_;
  // The last token when it was a >= comparison: its register's slot and the token's index.
  std::optional<std::pair<std::uint32_t, std::size_t>> lower_bound_;
  std::string lower_bound_text_;
};

}  // namespace

bool NftRuleset::Feed(Bytes datagram) {
  bytes_ += datagram.size();
  if (bytes_ > kMaxNetfilterBytes)
    throw NetfilterParseError("nftables dump: more than " + std::to_string(kMaxNetfilterBytes) +
                              " bytes");
  for (std::size_t at = 0; at < datagram.size();) {
    if (datagram.size() - at < sizeof(nlmsghdr))
      throw NetfilterParseError("netlink message at offset " + std::to_string(at) +
                                ": short of a header");
    nlmsghdr header;
    std::memcpy(&header, datagram.data() + at, sizeof(header));
    if (header.nlmsg_len < sizeof(nlmsghdr) || header.nlmsg_len > datagram.size() - at)
      throw NetfilterParseError("netlink message at offset " + std::to_string(at) + ": length " +
                                std::to_string(header.nlmsg_len) + " out of bounds");
    const Bytes payload =
        datagram.subspan(at + sizeof(nlmsghdr), header.nlmsg_len - sizeof(nlmsghdr));
    at += NLMSG_ALIGN(header.nlmsg_len);
    if (header.nlmsg_flags & NLM_F_DUMP_INTR)
      throw NetfilterParseError("the rules changed while read (dump interrupted)");
    if (header.nlmsg_type == NLMSG_DONE) return true;
    if (header.nlmsg_type == NLMSG_NOOP) continue;
    if (header.nlmsg_type == NLMSG_ERROR) {
      int error = 0;
      if (payload.size() >= sizeof(error)) std::memcpy(&error, payload.data(), sizeof(error));
      if (error == 0) continue;
      throw NetfilterParseError("netlink error: " + std::string(std::strerror(-error)));
    }
    if ((header.nlmsg_type >> 8) != NFNL_SUBSYS_NFTABLES) continue;
    if (payload.size() < sizeof(nfgenmsg))
      throw NetfilterParseError("nftables message: short of its nfgenmsg");
    nfgenmsg generic;
    std::memcpy(&generic, payload.data(), sizeof(generic));
    const Bytes attributes = payload.subspan(sizeof(nfgenmsg));
    switch (header.nlmsg_type & 0xff) {
      case NFT_MSG_NEWTABLE:
        ParseTable(generic.nfgen_family, attributes);
        break;
      case NFT_MSG_NEWCHAIN:
        ParseChain(generic.nfgen_family, attributes);
        break;
      case NFT_MSG_NEWRULE:
        ParseRule(generic.nfgen_family, attributes);
        break;
      case NFT_MSG_NEWSET:
        ParseSet(generic.nfgen_family, attributes);
        break;
      case NFT_MSG_NEWSETELEM:
        ParseSetElements(generic.nfgen_family, attributes);
        break;
      default:
        break;
    }
  }
  return false;
}

void NftRuleset::ParseTable(int family, Bytes attributes) {
  Table table{family, "", false};
  ForEachAttribute(attributes, "table", [&](unsigned type, Bytes payload) {
    if (type == NFTA_TABLE_NAME) table.name = String(payload);
    if (type == NFTA_TABLE_FLAGS)
      table.dormant = Be32(payload, "table flags") & NFT_TABLE_F_DORMANT;
  });
  tables_.push_back(std::move(table));
}

void NftRuleset::ParseChain(int family, Bytes attributes) {
  Chain chain;
  chain.family = family;
  ForEachAttribute(attributes, "chain", [&](unsigned type, Bytes payload) {
    if (type == NFTA_CHAIN_TABLE) chain.table = String(payload);
    if (type == NFTA_CHAIN_NAME) chain.name = String(payload);
    if (type == NFTA_CHAIN_POLICY) chain.policy_drop = Be32(payload, "chain policy") == NF_DROP;
    if (type == NFTA_CHAIN_HOOK) {
      ForEachAttribute(payload, "chain " + chain.name + " hook", [&](unsigned hook, Bytes value) {
        if (hook == NFTA_HOOK_HOOKNUM)
          chain.hook = static_cast<int>(Be32(value, "chain " + chain.name + " hook number"));
      });
    }
  });
  if (chains_.size() >= kMaxNetfilterRules)
    throw NetfilterParseError("nftables dump: more than " + std::to_string(kMaxNetfilterRules) +
                              " chains");
  chains_.push_back(std::move(chain));
}

void NftRuleset::ParseRule(int family, Bytes attributes) {
  if (rules_.size() >= kMaxNetfilterRules)
    throw NetfilterParseError("nftables dump: more than " + std::to_string(kMaxNetfilterRules) +
                              " rules");
  Rule rule;
  rule.family = family;
  std::optional<Bytes> expressions;
  ForEachAttribute(attributes, "rule", [&](unsigned type, Bytes payload) {
    if (type == NFTA_RULE_TABLE) rule.table = String(payload);
    if (type == NFTA_RULE_CHAIN) rule.chain = String(payload);
    if (type == NFTA_RULE_EXPRESSIONS) expressions = payload;
  });
  const std::string where = "rule in table " + rule.table + " chain " + rule.chain;
  if (expressions) {
    ForEachAttribute(*expressions, where, [&](unsigned type, Bytes element) {
      if (type != NFTA_LIST_ELEM) return;
      if (rule.expressions.size() >= kMaxRuleExpressions)
        throw NetfilterParseError(where + ": more than " + std::to_string(kMaxRuleExpressions) +
                                  " expressions");
      Expression expression;
      ForEachAttribute(element, where, [&](unsigned type_of, Bytes payload) {
        if (type_of == NFTA_EXPR_NAME) expression.name = String(payload);
        if (type_of == NFTA_EXPR_DATA) expression.data.assign(payload.begin(), payload.end());
      });
      rule.expressions.push_back(std::move(expression));
    });
  }
  // Built once here so that a malformed rule is an error of the dump; again, with the sets'
  // elements, by Tables().
  core::FirewallRule checked;
  RuleBuilder builder(checked, nullptr);
  for (const Expression& expression : rule.expressions)
    builder.Expression(expression.name, expression.data);
  builder.Finish();
  rules_.push_back(std::move(rule));
}

void NftRuleset::ParseSet(int family, Bytes attributes) {
  if (sets_.size() >= kMaxNftSets)
    throw NetfilterParseError("nftables dump: more than " + std::to_string(kMaxNftSets) + " sets");
  Set set;
  set.name.family = family;
  ForEachAttribute(attributes, "set", [&](unsigned type, Bytes payload) {
    if (type == NFTA_SET_TABLE) set.name.table = String(payload);
    if (type == NFTA_SET_NAME) set.name.name = String(payload);
    if (type == NFTA_SET_FLAGS) set.flags = Be32(payload, "set flags");
  });
  sets_.push_back(std::move(set));
}

void NftRuleset::ParseSetElements(int family, Bytes attributes) {
  std::string table, name;
  std::optional<Bytes> list;
  ForEachAttribute(attributes, "set elements", [&](unsigned type, Bytes payload) {
    if (type == NFTA_SET_ELEM_LIST_TABLE) table = String(payload);
    if (type == NFTA_SET_ELEM_LIST_SET) name = String(payload);
    if (type == NFTA_SET_ELEM_LIST_ELEMENTS) list = payload;
  });
  const auto set = std::find_if(sets_.begin(), sets_.end(), [&](const Set& candidate) {
    return candidate.name.family == family && candidate.name.table == table &&
           candidate.name.name == name;
  });
  if (set == sets_.end() || !list) return;
  const std::string where = "set " + name + " in table " + table;
  set->elements_read = true;
  ForEachAttribute(*list, where, [&](unsigned type, Bytes payload) {
    if (type != NFTA_LIST_ELEM) return;
    if (++elements_ > kMaxSetElements)
      throw NetfilterParseError("nftables dump: more than " + std::to_string(kMaxSetElements) +
                                " set elements");
    Element element;
    ForEachAttribute(payload, where, [&](unsigned attribute, Bytes value) {
      if (attribute == NFTA_SET_ELEM_KEY) element.key = ParseData(value, where + ": key").value;
      if (attribute == NFTA_SET_ELEM_KEY_END)
        element.key_end = ParseData(value, where + ": key end").value;
      if (attribute == NFTA_SET_ELEM_DATA) {
        ParseData(value, where + ": data");  // checked here, read when the rules are built
        element.data.assign(value.begin(), value.end());
      }
      if (attribute == NFTA_SET_ELEM_FLAGS)
        element.interval_end = Be32(value, where + ": flags") & NFT_SET_ELEM_INTERVAL_END;
    });
    set->elements.push_back(std::move(element));
  });
}

std::vector<NftRuleset::SetName> NftRuleset::Sets() const {
  std::vector<SetName> names;
  for (const Set& set : sets_) names.push_back(set.name);
  return names;
}

std::vector<core::FirewallTable> NftRuleset::Tables() const {
  // Indexed once, so that building is linear in the rules (and their lookups).
  using Key = std::tuple<int, std::string, std::string>;  // family, table, chain or set
  std::vector<core::FirewallTable> tables;
  std::map<std::pair<int, std::string>, std::size_t> table_index;
  for (const Table& table : tables_) {
    if (table.dormant || table_index.contains({table.family, table.name})) continue;
    table_index[{table.family, table.name}] = tables.size();
    core::FirewallTable out;
    out.backend = core::FirewallBackend::kNftables;
    out.family = FamilyName(table.family);
    out.name = table.name;
    tables.push_back(std::move(out));
  }
  std::map<Key, std::pair<std::size_t, std::size_t>> chain_index;  // table's, chain's index
  for (const Chain& chain : chains_) {
    const auto table = table_index.find({chain.family, chain.table});
    if (table == table_index.end()) continue;
    const bool inet = chain.family == NFPROTO_IPV4 || chain.family == NFPROTO_INET ||
                      chain.family == NFPROTO_IPV6;
    auto& chains = tables[table->second].chains;
    chain_index[{chain.family, chain.table, chain.name}] = {table->second, chains.size()};
    chains.push_back({chain.name,
                      inet && chain.hook == NF_INET_LOCAL_IN,
                      inet && chain.hook == NF_INET_FORWARD,
                      chain.policy_drop ? RuleVerdict::kDrop : RuleVerdict::kAccept,
                      {}});
  }
  std::map<Key, const Set*> set_index;
  for (const Set& set : sets_) set_index[{set.name.family, set.name.table, set.name.name}] = &set;
  for (const Rule& rule : rules_) {
    const auto chain = chain_index.find({rule.family, rule.table, rule.chain});
    if (chain == chain_index.end()) continue;
    const SetResolver sets = [&](const std::string& name) -> const Set* {
      const auto it = set_index.find({rule.family, rule.table, name});
      return it == set_index.end() ? nullptr : it->second;
    };
    core::FirewallRule built;
    RuleBuilder builder(built, sets);
    for (const Expression& expression : rule.expressions)
      builder.Expression(expression.name, expression.data);
    auto& rules = tables[chain->second.first].chains[chain->second.second].rules;
    for (auto& variant : builder.Finish()) rules.push_back(std::move(variant));
  }
  return tables;
}

}  // namespace ncclguard::probes
