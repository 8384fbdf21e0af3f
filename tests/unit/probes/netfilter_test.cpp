// probes/netfilter's parsers on crafted kernel answers: iptables-legacy's ipt_entry blob and
// nftables' netlink dumps. Well-formed ones become rules the analyser names; truncated,
// oversized, deeply nested and random ones get a NetfilterParseError, never a crash.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nf_tables_compat.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/x_tables.h>
#include <linux/netfilter/xt_conntrack.h>
#include <linux/netfilter/xt_tcpudp.h>
#include <linux/netfilter_ipv4/ip_tables.h>
#include <linux/netlink.h>

#include <chrono>
#include <cstring>
#include <random>

#include "probes/netfilter.h"

namespace ncclguard::test {
namespace {

using Buffer = std::vector<unsigned char>;
using probes::NetfilterParseError;

void Append(Buffer& to, const void* data, std::size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  to.insert(to.end(), bytes, bytes + size);
}

void PadTo(Buffer& buffer, std::size_t alignment) {
  while (buffer.size() % alignment) buffer.push_back(0);
}

// One ipt_entry with its matches and target, offsets filled in.
struct XtPart {
  std::string name;
  Buffer data;
  std::uint8_t revision = 0;
};

// A match or target: xt_entry_match and xt_entry_target share their layout (size, name,
// revision), then the data, padded to 8 bytes.
Buffer XtBytes(const XtPart& part) {
  static_assert(sizeof(xt_entry_match) == sizeof(xt_entry_target));
  Buffer bytes(sizeof(xt_entry_match), 0);
  Append(bytes, part.data.data(), part.data.size());
  PadTo(bytes, 8);
  xt_entry_match header{};
  header.u.user.match_size = static_cast<std::uint16_t>(bytes.size());
  std::strncpy(header.u.user.name, part.name.c_str(), sizeof(header.u.user.name) - 1);
  header.u.user.revision = part.revision;
  std::memcpy(bytes.data(), &header, sizeof(header));
  return bytes;
}

Buffer IptEntry(const ipt_ip& ip, const std::vector<XtPart>& matches, const XtPart& target) {
  Buffer body;
  for (const XtPart& match : matches) {
    const Buffer part = XtBytes(match);
    Append(body, part.data(), part.size());
  }
  const Buffer target_part = XtBytes(target);
  ipt_entry entry{};
  entry.ip = ip;
  entry.target_offset = static_cast<std::uint16_t>(sizeof(ipt_entry) + body.size());
  entry.next_offset = static_cast<std::uint16_t>(entry.target_offset + target_part.size());
  Buffer out;
  Append(out, &entry, sizeof(entry));
  Append(out, body.data(), body.size());
  Append(out, target_part.data(), target_part.size());
  return out;
}

template <typename T>
Buffer Bytes(const T& value) {
  Buffer out;
  Append(out, &value, sizeof(value));
  return out;
}

XtPart Standard(int verdict) { return {XT_STANDARD_TARGET, Bytes(verdict)}; }

XtPart Error(const std::string& name) {
  Buffer data(XT_FUNCTION_MAXNAMELEN, 0);
  std::memcpy(data.data(), name.data(), name.size());
  return {XT_ERROR_TARGET, data};
}

ipt_ip TcpIp() {
  ipt_ip ip{};
  ip.proto = IPPROTO_TCP;
  return ip;
}

XtPart TcpDport(std::uint16_t first, std::uint16_t last) {
  xt_tcp tcp{};
  tcp.spts[1] = 0xffff;
  tcp.dpts[0] = first;
  tcp.dpts[1] = last;
  return {"tcp", Bytes(tcp)};
}

XtPart CtState(std::uint16_t states) {
  xt_conntrack_mtinfo3 info{};
  info.match_flags = XT_CONNTRACK_STATE;
  info.state_mask = states;
  return {"conntrack", Bytes(info), 3};
}

// INPUT: a DROP of new connections to the ephemeral range, a jump to `mychain`, policy ACCEPT;
// FORWARD: policy DROP; OUTPUT: policy ACCEPT; mychain: REJECT of 29500 with a TCP reset.
struct LegacyTable {
  Buffer entries;
  probes::IptTableInfo info;
};

LegacyTable CraftedLegacyTable() {
  LegacyTable table;
  Buffer& out = table.entries;
  auto add = [&](const Buffer& entry) {
    const auto offset = static_cast<std::uint32_t>(out.size());
    Append(out, entry.data(), entry.size());
    return offset;
  };
  const Buffer drop =
      IptEntry(TcpIp(), {TcpDport(32768, 60999), CtState(XT_CONNTRACK_STATE_BIT(IP_CT_NEW))},
               Standard(-NF_DROP - 1));
  const Buffer accept_policy = IptEntry({}, {}, Standard(-NF_ACCEPT - 1));
  const Buffer drop_policy = IptEntry({}, {}, Standard(-NF_DROP - 1));
  const Buffer error_head = IptEntry({}, {}, Error("mychain"));
  const Buffer reject = IptEntry(TcpIp(), {TcpDport(29500, 29500)}, {"REJECT", Bytes(int{7})});
  const Buffer closing = IptEntry({}, {}, Standard(XT_RETURN));
  const Buffer end = IptEntry({}, {}, Error("ERROR"));
  // The jump's offset: the first rule of mychain, after INPUT (3 entries), FORWARD, OUTPUT and
  // the head.
  const std::size_t standard = IptEntry({}, {}, Standard(0)).size();
  const std::size_t jump_to = drop.size() + 4 * standard + error_head.size();
  const Buffer jump = IptEntry({}, {}, Standard(static_cast<int>(jump_to)));
  auto& info = table.info;
  info.valid_hooks = (1 << NF_INET_LOCAL_IN) | (1 << NF_INET_FORWARD) | (1 << NF_INET_LOCAL_OUT);
  info.hook_entry[NF_INET_LOCAL_IN] = add(drop);
  add(jump);
  info.underflow[NF_INET_LOCAL_IN] = add(accept_policy);
  info.hook_entry[NF_INET_FORWARD] = info.underflow[NF_INET_FORWARD] = add(drop_policy);
  info.hook_entry[NF_INET_LOCAL_OUT] = info.underflow[NF_INET_LOCAL_OUT] = add(accept_policy);
  add(error_head);
  EXPECT_EQ(add(reject), jump_to);
  add(closing);
  add(end);
  info.size = static_cast<std::uint32_t>(out.size());
  return table;
}

const core::NcclPorts kNcclPorts{{{29500, 29500}, {32768, 60999}}};

// What the analyser says of the tables, one line a finding.
std::vector<std::string> Described(const std::vector<core::FirewallTable>& tables) {
  std::vector<std::string> lines;
  for (const auto& finding : core::FindNcclBlocks(tables, kNcclPorts, kNcclPorts))
    lines.push_back(core::DescribeFinding(finding));
  return lines;
}

TEST(NetfilterLegacy, ReadsChainsPoliciesJumpsAndMatches) {
  const LegacyTable crafted = CraftedLegacyTable();
  const core::FirewallTable table = probes::ParseIptEntries(crafted.entries, crafted.info);
  ASSERT_EQ(table.chains.size(), 4u);
  const auto& input = table.chains[0];
  EXPECT_EQ(input.name, "INPUT");
  EXPECT_TRUE(input.hook_input);
  ASSERT_EQ(input.rules.size(), 2u);
  EXPECT_EQ(input.rules[0].text,
            "-p tcp -m tcp --dport 32768:60999 -m conntrack --ctstate NEW -j DROP");
  EXPECT_EQ(input.rules[1].text, "-j mychain");
  EXPECT_EQ(input.rules[1].target, "mychain");
  EXPECT_EQ(table.chains[1].name, "FORWARD");
  EXPECT_EQ(table.chains[1].policy, core::RuleVerdict::kDrop);
  EXPECT_EQ(table.chains[3].name, "mychain");
  ASSERT_EQ(table.chains[3].rules.size(), 1u) << "the closing RETURN is not a rule";
  EXPECT_EQ(table.chains[3].rules[0].text,
            "-p tcp -m tcp --dport 29500 -j REJECT --reject-with tcp-reset");

  const std::vector<std::string> found = Described({table});
  const std::vector<std::string> expected = {
      "iptables (legacy) filter INPUT -> mychain: -p tcp -m tcp --dport 29500 -j REJECT "
      "--reject-with tcp-reset rejects new TCP connections to port(s) 29500 on INPUT "
      "(host-network pods)",
      "iptables (legacy) filter INPUT: -p tcp -m tcp --dport 32768:60999 -m conntrack --ctstate "
      "NEW -j DROP drops new TCP connections to port(s) 32768-60999 on INPUT (host-network pods)",
      "iptables (legacy) filter FORWARD: policy drop, no rule accepting them first, drops new "
      "TCP connections to port(s) 29500, 32768-60999 on FORWARD (pod-network pods)"};
  EXPECT_EQ(found, expected);
}

TEST(NetfilterLegacy, TruncatedTablesAreErrors) {
  const LegacyTable crafted = CraftedLegacyTable();
  for (std::size_t size = 0; size < crafted.entries.size(); ++size) {
    probes::IptTableInfo info = crafted.info;
    info.size = static_cast<std::uint32_t>(size);
    const std::span<const unsigned char> prefix(crafted.entries.data(), size);
    try {
      probes::ParseIptEntries(prefix, info);
    } catch (const NetfilterParseError&) {
    }
  }
  probes::IptTableInfo wrong = crafted.info;
  wrong.size += 8;
  EXPECT_THROW(probes::ParseIptEntries(crafted.entries, wrong), NetfilterParseError);
}

TEST(NetfilterLegacy, OffsetsOutOfBoundsAreNamed) {
  const LegacyTable crafted = CraftedLegacyTable();
  auto expect_error = [&](std::size_t field, std::uint16_t value, const std::string& words) {
    Buffer entries = crafted.entries;
    std::memcpy(entries.data() + field, &value, sizeof(value));
    try {
      probes::ParseIptEntries(entries, crafted.info);
      ADD_FAILURE() << "no error for " << words;
    } catch (const NetfilterParseError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expect_error(offsetof(ipt_entry, next_offset), 0xffff, "next_offset 65535 out of bounds");
  expect_error(offsetof(ipt_entry, next_offset), 4, "next_offset 4 out of bounds");
  expect_error(offsetof(ipt_entry, target_offset), 0xfff0, "target_offset 65520 out of bounds");
  expect_error(sizeof(ipt_entry), 0x7fff, "size 32767 out of bounds");  // the first match
  expect_error(sizeof(ipt_entry), 2, "size 2 out of bounds");
}

TEST(NetfilterLegacy, RandomBytesNeverCrash) {
  std::mt19937 random(48);
  const LegacyTable crafted = CraftedLegacyTable();
  for (int round = 0; round < 2000; ++round) {
    Buffer entries = crafted.entries;
    for (int flips = 0; flips < 8; ++flips)
      entries[random() % entries.size()] = static_cast<unsigned char>(random());
    try {
      probes::ParseIptEntries(entries, crafted.info);
    } catch (const NetfilterParseError&) {
    }
  }
}

// Netlink messages of nftables' dumps.
Buffer Attribute(std::uint16_t type, const Buffer& payload) {
  nlattr header{};
  header.nla_len = static_cast<std::uint16_t>(sizeof(nlattr) + payload.size());
  header.nla_type = type;
  Buffer out;
  Append(out, &header, sizeof(header));
  Append(out, payload.data(), payload.size());
  PadTo(out, NLA_ALIGNTO);
  return out;
}

Buffer Nested(std::uint16_t type, const std::vector<Buffer>& attributes) {
  Buffer payload;
  for (const Buffer& attribute : attributes) Append(payload, attribute.data(), attribute.size());
  return Attribute(static_cast<std::uint16_t>(type | NLA_F_NESTED), payload);
}

Buffer Text(std::uint16_t type, const std::string& text) {
  Buffer bytes(text.begin(), text.end());
  bytes.push_back(0);
  return Attribute(type, bytes);
}

Buffer U32(std::uint16_t type, std::uint32_t value) { return Attribute(type, Bytes(htonl(value))); }

Buffer Value(std::uint16_t type, const Buffer& value) {
  return Nested(type, {Attribute(NFTA_DATA_VALUE, value)});
}

Buffer Expression(const std::string& name, const std::vector<Buffer>& data) {
  return Nested(NFTA_LIST_ELEM, {Text(NFTA_EXPR_NAME, name), Nested(NFTA_EXPR_DATA, data)});
}

Buffer Message(std::uint16_t type, std::uint8_t family, const std::vector<Buffer>& attributes) {
  Buffer payload;
  nfgenmsg generic{};
  generic.nfgen_family = family;
  Append(payload, &generic, sizeof(generic));
  for (const Buffer& attribute : attributes) Append(payload, attribute.data(), attribute.size());
  nlmsghdr header{};
  header.nlmsg_len = static_cast<std::uint32_t>(sizeof(header) + payload.size());
  header.nlmsg_type = static_cast<std::uint16_t>((NFNL_SUBSYS_NFTABLES << 8) | type);
  Buffer out;
  Append(out, &header, sizeof(header));
  Append(out, payload.data(), payload.size());
  PadTo(out, NLMSG_ALIGNTO);
  return out;
}

Buffer Done() {
  nlmsghdr header{};
  header.nlmsg_len = sizeof(header);
  header.nlmsg_type = NLMSG_DONE;
  return Bytes(header);
}

Buffer Port(std::uint16_t port) { return Bytes(htons(port)); }

Buffer Verdict(int code, const std::string& chain = "") {
  std::vector<Buffer> verdict{U32(NFTA_VERDICT_CODE, static_cast<std::uint32_t>(code))};
  if (!chain.empty()) verdict.push_back(Text(NFTA_VERDICT_CHAIN, chain));
  return Expression("immediate",
                    {U32(NFTA_IMMEDIATE_DREG, NFT_REG_VERDICT),
                     Nested(NFTA_IMMEDIATE_DATA, {Nested(NFTA_DATA_VERDICT, verdict)})});
}

Buffer L4protoTcp() {
  return Expression("meta", {U32(NFTA_META_KEY, NFT_META_L4PROTO), U32(NFTA_META_DREG, NFT_REG_1)});
}

Buffer TcpDportLoad() {
  return Expression("payload", {U32(NFTA_PAYLOAD_DREG, NFT_REG_1),
                                U32(NFTA_PAYLOAD_BASE, NFT_PAYLOAD_TRANSPORT_HEADER),
                                U32(NFTA_PAYLOAD_OFFSET, 2), U32(NFTA_PAYLOAD_LEN, 2)});
}

Buffer CmpEq(const Buffer& value) {
  return Expression("cmp", {U32(NFTA_CMP_SREG, NFT_REG_1), U32(NFTA_CMP_OP, NFT_CMP_EQ),
                            Value(NFTA_CMP_DATA, value)});
}

Buffer Rule(const std::string& chain, const std::vector<Buffer>& expressions) {
  return Message(NFT_MSG_NEWRULE, NFPROTO_INET,
                 {Text(NFTA_RULE_TABLE, "filter"), Text(NFTA_RULE_CHAIN, chain),
                  Nested(NFTA_RULE_EXPRESSIONS, expressions)});
}

Buffer Chain(const std::string& name, int hook, std::uint32_t policy) {
  return Message(NFT_MSG_NEWCHAIN, NFPROTO_INET,
                 {Text(NFTA_CHAIN_TABLE, "filter"), Text(NFTA_CHAIN_NAME, name),
                  Nested(NFTA_CHAIN_HOOK, {U32(NFTA_HOOK_HOOKNUM, static_cast<std::uint32_t>(hook)),
                                           U32(NFTA_HOOK_PRIORITY, 0)}),
                  U32(NFTA_CHAIN_POLICY, policy)});
}

// table inet filter: input (policy drop) accepts established and related, and 29500;
// forward drops 32768-60999 (a range expression) and rejects what matches set @blocked.
Buffer CraftedNftDump() {
  Buffer out;
  auto add = [&](const Buffer& message) { Append(out, message.data(), message.size()); };
  add(Message(NFT_MSG_NEWTABLE, NFPROTO_INET,
              {Text(NFTA_TABLE_NAME, "filter"), U32(NFTA_TABLE_FLAGS, 0)}));
  add(Chain("input", NF_INET_LOCAL_IN, NF_DROP));
  add(Chain("forward", NF_INET_FORWARD, NF_ACCEPT));
  const std::uint32_t established = core::kCtEstablished | core::kCtRelated;
  add(Rule("input",
           {Expression("ct", {U32(NFTA_CT_KEY, NFT_CT_STATE), U32(NFTA_CT_DREG, NFT_REG_1)}),
            Expression("bitwise",
                       {U32(NFTA_BITWISE_SREG, NFT_REG_1), U32(NFTA_BITWISE_DREG, NFT_REG_1),
                        U32(NFTA_BITWISE_LEN, 4), Value(NFTA_BITWISE_MASK, Bytes(established)),
                        Value(NFTA_BITWISE_XOR, Bytes(std::uint32_t{0}))}),
            Expression("cmp", {U32(NFTA_CMP_SREG, NFT_REG_1), U32(NFTA_CMP_OP, NFT_CMP_NEQ),
                               Value(NFTA_CMP_DATA, Bytes(std::uint32_t{0}))}),
            Verdict(NF_ACCEPT)}));
  add(Rule("input", {L4protoTcp(), CmpEq({IPPROTO_TCP}), TcpDportLoad(), CmpEq(Port(29500)),
                     Expression("counter", {}), Verdict(NF_ACCEPT)}));
  add(Rule("forward",
           {L4protoTcp(), CmpEq({IPPROTO_TCP}), TcpDportLoad(),
            Expression("range", {U32(NFTA_RANGE_SREG, NFT_REG_1), U32(NFTA_RANGE_OP, NFT_RANGE_EQ),
                                 Value(NFTA_RANGE_FROM_DATA, Port(32768)),
                                 Value(NFTA_RANGE_TO_DATA, Port(60999))}),
            Verdict(NF_DROP)}));
  add(Rule("forward", {L4protoTcp(), CmpEq({IPPROTO_TCP}), TcpDportLoad(),
                       Expression("lookup", {Text(NFTA_LOOKUP_SET, "blocked"),
                                             U32(NFTA_LOOKUP_SREG, NFT_REG_1)}),
                       Expression("reject", {U32(NFTA_REJECT_TYPE, NFT_REJECT_TCP_RST)})}));
  add(Done());
  return out;
}

TEST(NetfilterNft, ReadsTablesChainsAndRules) {
  probes::NftRuleset ruleset;
  ASSERT_TRUE(ruleset.Feed(CraftedNftDump()));
  const auto tables = ruleset.Tables();
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_EQ(tables[0].family, "inet");
  ASSERT_EQ(tables[0].chains.size(), 2u);
  const auto& input = tables[0].chains[0];
  EXPECT_TRUE(input.hook_input);
  EXPECT_EQ(input.policy, core::RuleVerdict::kDrop);
  ASSERT_EQ(input.rules.size(), 2u);
  EXPECT_EQ(input.rules[0].text, "ct state established,related accept");
  EXPECT_EQ(input.rules[1].text, "tcp dport 29500 counter accept");
  const auto& forward = tables[0].chains[1];
  ASSERT_EQ(forward.rules.size(), 2u);
  EXPECT_EQ(forward.rules[0].text, "tcp dport 32768-60999 drop");
  EXPECT_EQ(forward.rules[1].text, "tcp dport @blocked reject with tcp reset");

  const std::vector<std::string> found = Described(tables);
  const std::vector<std::string> expected = {
      "nft table inet filter chain input: policy drop, no rule accepting them first, drops new "
      "TCP connections to port(s) 32768-60999 on INPUT (host-network pods)",
      "nft table inet filter chain forward: tcp dport 32768-60999 drop drops new TCP "
      "connections to port(s) 32768-60999 on FORWARD (pod-network pods)",
      "nft table inet filter chain forward: tcp dport @blocked reject with tcp reset may reject "
      "new TCP connections to port(s) 29500 on FORWARD (pod-network pods) (its ports are in a "
      "set that was not read)"};
  EXPECT_EQ(found, expected);
}

// iptables-nft loads only a prefix's whole bytes: -s 10.0.0.0/8 is one byte compared with 10,
// -d 127.0.0.0/8 one byte compared with 127 (kube-proxy's KUBE-FIREWALL drops such packets).
TEST(NetfilterNft, AddressPrefixesOfWholeBytes) {
  auto address_byte = [](std::uint32_t offset, std::uint8_t value) {
    return std::vector<Buffer>{
        Expression("payload", {U32(NFTA_PAYLOAD_DREG, NFT_REG_1),
                               U32(NFTA_PAYLOAD_BASE, NFT_PAYLOAD_NETWORK_HEADER),
                               U32(NFTA_PAYLOAD_OFFSET, offset), U32(NFTA_PAYLOAD_LEN, 1)}),
        CmpEq({value})};
  };
  std::vector<Buffer> to_loopback = address_byte(16, 127);
  to_loopback.push_back(Verdict(NF_DROP));
  std::vector<Buffer> from_subnet = address_byte(12, 10);
  for (const Buffer& expression :
       {L4protoTcp(), CmpEq({IPPROTO_TCP}), TcpDportLoad(),
        Expression("range", {U32(NFTA_RANGE_SREG, NFT_REG_1), U32(NFTA_RANGE_OP, NFT_RANGE_EQ),
                             Value(NFTA_RANGE_FROM_DATA, Port(1024)),
                             Value(NFTA_RANGE_TO_DATA, Port(65535))}),
        Verdict(NF_ACCEPT)})
    from_subnet.push_back(expression);
  Buffer dump;
  for (const Buffer& message :
       {Message(NFT_MSG_NEWTABLE, NFPROTO_INET, {Text(NFTA_TABLE_NAME, "filter")}),
        Chain("input", NF_INET_LOCAL_IN, NF_DROP), Rule("input", to_loopback),
        Rule("input", from_subnet), Done()})
    Append(dump, message.data(), message.size());
  probes::NftRuleset ruleset;
  ASSERT_TRUE(ruleset.Feed(dump));
  const auto tables = ruleset.Tables();
  ASSERT_EQ(tables.size(), 1u);
  const auto& rules = tables[0].chains[0].rules;
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].text, "ip daddr 127.0.0.0/8 drop");
  EXPECT_EQ(rules[0].other, core::Tristate::kNo);
  EXPECT_EQ(rules[1].text, "ip saddr 10.0.0.0/8 tcp dport 1024-65535 accept");
  EXPECT_TRUE(core::FindNcclBlocks(tables, kNcclPorts, kNcclPorts).empty())
      << core::DescribeFinding(core::FindNcclBlocks(tables, kNcclPorts, kNcclPorts)[0]);
}

Buffer SetElement(const Buffer& key, std::optional<int> verdict = std::nullopt,
                  bool interval_end = false) {
  std::vector<Buffer> attributes{Value(NFTA_SET_ELEM_KEY, key)};
  if (verdict)
    attributes.push_back(
        Nested(NFTA_SET_ELEM_DATA,
               {Nested(NFTA_DATA_VERDICT,
                       {U32(NFTA_VERDICT_CODE, static_cast<std::uint32_t>(*verdict))})}));
  if (interval_end) attributes.push_back(U32(NFTA_SET_ELEM_FLAGS, NFT_SET_ELEM_INTERVAL_END));
  return Nested(NFTA_LIST_ELEM, attributes);
}

Buffer Set(const std::string& name, std::uint32_t flags, const std::vector<Buffer>& elements) {
  Buffer out = Message(
      NFT_MSG_NEWSET, NFPROTO_INET,
      {Text(NFTA_SET_TABLE, "filter"), Text(NFTA_SET_NAME, name), U32(NFTA_SET_FLAGS, flags)});
  const Buffer listed =
      Message(NFT_MSG_NEWSETELEM, NFPROTO_INET,
              {Text(NFTA_SET_ELEM_LIST_TABLE, "filter"), Text(NFTA_SET_ELEM_LIST_SET, name),
               Nested(NFTA_SET_ELEM_LIST_ELEMENTS, elements)});
  Append(out, listed.data(), listed.size());
  return out;
}

Buffer LookupOf(const std::string& set, std::optional<std::uint32_t> dreg = std::nullopt) {
  std::vector<Buffer> attributes{Text(NFTA_LOOKUP_SET, set), U32(NFTA_LOOKUP_SREG, NFT_REG_1)};
  if (dreg) attributes.push_back(U32(NFTA_LOOKUP_DREG, *dreg));
  return Expression("lookup", attributes);
}

// A ct state verdict map (a SYN's NEW has no entry: the next rule), an anonymous port set, an
// interval set (each range's end element is the port after it) and a verdict map on the port.
TEST(NetfilterNft, SetsAndVerdictMapsAreRead) {
  const auto state = [](std::uint32_t bits) { return Bytes(bits); };
  Buffer dump;
  for (const Buffer& message :
       {Message(NFT_MSG_NEWTABLE, NFPROTO_INET, {Text(NFTA_TABLE_NAME, "filter")}),
        Chain("input", NF_INET_LOCAL_IN, NF_DROP),
        Set("__map0", NFT_SET_MAP,
            {SetElement(state(core::kCtEstablished), NF_ACCEPT),
             SetElement(state(core::kCtInvalid), NF_DROP)}),
        Set("__set0", 0, {SetElement(Port(29500)), SetElement(Port(29400))}),
        Set("ranges", NFT_SET_INTERVAL,
            {SetElement(Port(50001), std::nullopt, true), SetElement(Port(40000)),
             SetElement(Port(41001), std::nullopt, true), SetElement(Port(50000))}),
        Set("__map1", NFT_SET_MAP | NFT_SET_INTERVAL,
            {SetElement(Port(32768), NF_ACCEPT), SetElement(Port(40000), std::nullopt, true),
             SetElement(Port(45000), NF_DROP), SetElement(Port(45001), std::nullopt, true)}),
        Rule("input",
             {Expression("ct", {U32(NFTA_CT_KEY, NFT_CT_STATE), U32(NFTA_CT_DREG, NFT_REG_1)}),
              LookupOf("__map0", NFT_REG_VERDICT)}),
        Rule("input", {L4protoTcp(), CmpEq({IPPROTO_TCP}), TcpDportLoad(), LookupOf("__set0"),
                       Verdict(NF_ACCEPT)}),
        Rule("input", {L4protoTcp(), CmpEq({IPPROTO_TCP}), TcpDportLoad(), LookupOf("ranges"),
                       Verdict(NF_ACCEPT)}),
        Rule("input", {L4protoTcp(), CmpEq({IPPROTO_TCP}), TcpDportLoad(),
                       LookupOf("__map1", NFT_REG_VERDICT)}),
        Done()})
    Append(dump, message.data(), message.size());
  probes::NftRuleset ruleset;
  ASSERT_TRUE(ruleset.Feed(dump));
  ASSERT_EQ(ruleset.Sets().size(), 4u);
  const auto tables = ruleset.Tables();
  ASSERT_EQ(tables.size(), 1u);
  const auto& rules = tables[0].chains[0].rules;
  ASSERT_EQ(rules.size(), 5u);  // the port map is one rule a range
  EXPECT_EQ(rules[0].text, "ct state vmap { invalid : drop, established : accept }");
  EXPECT_EQ(rules[0].verdict, core::RuleVerdict::kContinue);
  EXPECT_EQ(rules[1].text, "tcp dport { 29400, 29500 } accept");
  EXPECT_EQ(rules[2].text, "tcp dport @ranges accept");
  EXPECT_EQ(rules[3].text, "tcp dport vmap { 32768-39999 : accept, 45000 : drop }");
  const std::vector<std::string> found = Described(tables);
  const std::vector<std::string> expected = {
      "nft table inet filter chain input: policy drop, no rule accepting them first, drops new "
      "TCP connections to port(s) 41001-44999, 45001-49999, 50001-60999 on INPUT (host-network "
      "pods)",
      "nft table inet filter chain input: tcp dport vmap { 32768-39999 : accept, 45000 : drop } "
      "drops new TCP connections to port(s) 45000 on INPUT (host-network pods)"};
  EXPECT_EQ(found, expected);
}

// 20,000 rules of each kind are read and walked in seconds, not minutes: no step is quadratic
// (1.3 s in this -O0 test build; the probe reads 20,000 of each from the kernel in 0.3 s).
TEST(NetfilterNft, ManyRulesAreReadInLinearTime) {
  constexpr int kRules = 20000;
  Buffer dump;
  for (const Buffer& message :
       {Message(NFT_MSG_NEWTABLE, NFPROTO_INET, {Text(NFTA_TABLE_NAME, "filter")}),
        Chain("input", NF_INET_LOCAL_IN, NF_DROP)})
    Append(dump, message.data(), message.size());
  for (int i = 0; i < kRules; ++i) {
    const Buffer rule =
        Rule("input", {L4protoTcp(), CmpEq({IPPROTO_TCP}), TcpDportLoad(),
                       CmpEq(Port(static_cast<std::uint16_t>(1024 + i))), Verdict(NF_ACCEPT)});
    Append(dump, rule.data(), rule.size());
  }
  const Buffer done = Done();
  Append(dump, done.data(), done.size());

  Buffer entries;
  probes::IptTableInfo info;
  info.valid_hooks = 1 << NF_INET_LOCAL_IN;
  for (int i = 0; i < kRules; ++i) {
    const Buffer entry = IptEntry(
        TcpIp(),
        {TcpDport(static_cast<std::uint16_t>(1024 + i), static_cast<std::uint16_t>(1024 + i))},
        Standard(-NF_ACCEPT - 1));
    Append(entries, entry.data(), entry.size());
  }
  info.underflow[NF_INET_LOCAL_IN] = static_cast<std::uint32_t>(entries.size());
  for (const Buffer& entry :
       {IptEntry({}, {}, Standard(-NF_DROP - 1)), IptEntry({}, {}, Error("ERROR"))})
    Append(entries, entry.data(), entry.size());
  info.size = static_cast<std::uint32_t>(entries.size());

  const auto started = std::chrono::steady_clock::now();
  probes::NftRuleset ruleset;
  ASSERT_TRUE(ruleset.Feed(dump));
  std::vector<core::FirewallTable> tables = ruleset.Tables();
  tables.push_back(probes::ParseIptEntries(entries, info));
  ASSERT_EQ(tables[0].chains[0].rules.size(), static_cast<std::size_t>(kRules));
  ASSERT_EQ(tables[1].chains[0].rules.size(), static_cast<std::size_t>(kRules));
  const auto findings = core::FindNcclBlocks(tables, kNcclPorts, kNcclPorts);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  // Ports 1024-21023 accepted: the policy drops 29500 and the ephemeral range, in both.
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].rule, "policy drop");
}

TEST(NetfilterNft, TruncatedDumpsAreErrors) {
  const Buffer dump = CraftedNftDump();
  for (std::size_t size = 0; size < dump.size(); ++size) {
    probes::NftRuleset ruleset;
    try {
      ruleset.Feed(std::span<const unsigned char>(dump.data(), size));
    } catch (const NetfilterParseError&) {
    }
  }
}

TEST(NetfilterNft, OversizedLengthsAndKernelErrorsAreNamed) {
  Buffer rule = Rule("input", {Verdict(NF_DROP)});
  // The first attribute after nlmsghdr and nfgenmsg claims more than the message holds.
  const std::uint16_t huge = 0xfff0;
  std::memcpy(rule.data() + sizeof(nlmsghdr) + sizeof(nfgenmsg), &huge, sizeof(huge));
  probes::NftRuleset ruleset;
  try {
    ruleset.Feed(rule);
    ADD_FAILURE() << "an attribute longer than its message was read";
  } catch (const NetfilterParseError& e) {
    EXPECT_NE(std::string(e.what()).find("attribute length 65520"), std::string::npos) << e.what();
  }

  nlmsghdr header{};
  header.nlmsg_type = NLMSG_ERROR;
  header.nlmsg_len = sizeof(header) + sizeof(nlmsgerr);
  nlmsgerr error{};
  error.error = -EPERM;
  Buffer message = Bytes(header);
  Append(message, &error, sizeof(error));
  EXPECT_THROW(
      {
        try {
          probes::NftRuleset().Feed(message);
        } catch (const NetfilterParseError& e) {
          EXPECT_NE(std::string(e.what()).find("Operation not permitted"), std::string::npos);
          throw;
        }
      },
      NetfilterParseError);
}

TEST(NetfilterNft, DeepNestingAndManyExpressionsAreBounded) {
  // 2,000 levels of nesting inside a cmp's data: read one level deep, the rest ignored.
  Buffer deep = Attribute(NFTA_DATA_VALUE, Port(29500));
  for (int level = 0; level < 2000 && deep.size() + 8 < 0xffff; ++level)
    deep = Nested(NFTA_DATA_VERDICT, {deep});
  const auto started = std::chrono::steady_clock::now();
  probes::NftRuleset ruleset;
  try {
    ruleset.Feed(Rule(
        "input", {TcpDportLoad(),
                  Expression("cmp", {U32(NFTA_CMP_SREG, NFT_REG_1), Nested(NFTA_CMP_DATA, {deep})}),
                  Verdict(NF_DROP)}));
  } catch (const NetfilterParseError&) {
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(1));

  std::vector<Buffer> many(probes::kMaxRuleExpressions + 1, Expression("counter", {}));
  try {
    probes::NftRuleset().Feed(Rule("input", many));
    ADD_FAILURE() << "more expressions than the limit were read";
  } catch (const NetfilterParseError& e) {
    EXPECT_NE(std::string(e.what()).find("more than 256 expressions"), std::string::npos);
  }
}

TEST(NetfilterNft, RandomBytesNeverCrash) {
  std::mt19937 random(48);
  const Buffer dump = CraftedNftDump();
  for (int round = 0; round < 2000; ++round) {
    Buffer bytes = dump;
    for (int flips = 0; flips < 8; ++flips)
      bytes[random() % bytes.size()] = static_cast<unsigned char>(random());
    probes::NftRuleset ruleset;
    try {
      ruleset.Feed(bytes);
      ruleset.Tables();
    } catch (const NetfilterParseError&) {
    }
  }
}

}  // namespace
}  // namespace ncclguard::test
