// core/host_firewall's walk of INPUT and FORWARD for a new connection's SYN to NCCL's ports:
// which rule drops it, when a rule before it saves it, and when only "may" can be said.
#include <gtest/gtest.h>

#include "core/host_firewall.h"

namespace ncclguard::test {
namespace {

using core::FirewallChain;
using core::FirewallFinding;
using core::FirewallPath;
using core::FirewallRule;
using core::FirewallTable;
using core::PortRange;
using core::RuleVerdict;
using core::Tristate;

const core::NcclPorts kPorts{{{29500, 29500}, {32768, 60999}}};

FirewallRule Tcp(std::string text, std::vector<PortRange> ports, RuleVerdict verdict,
                 bool negated = false) {
  FirewallRule rule;
  rule.text = std::move(text);
  rule.protocol = 6;
  if (!ports.empty()) rule.dports.push_back({std::move(ports), negated, false});
  rule.verdict = verdict;
  return rule;
}

FirewallRule Established() {
  FirewallRule rule;
  rule.text = "-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT";
  rule.ct_states = core::kCtEstablished | core::kCtRelated;
  rule.verdict = RuleVerdict::kAccept;
  return rule;
}

FirewallRule Any(std::string text, RuleVerdict verdict, std::string target = "") {
  FirewallRule rule;
  rule.text = std::move(text);
  rule.verdict = verdict;
  rule.target = std::move(target);
  return rule;
}

FirewallRule NotUnderstood(FirewallRule rule, std::string why) {
  rule.other = Tristate::kMaybe;
  rule.not_understood = std::move(why);
  return rule;
}

FirewallTable Legacy(std::vector<FirewallRule> input, RuleVerdict policy = RuleVerdict::kAccept,
                     std::vector<FirewallChain> user = {}) {
  FirewallTable table;
  table.family = "ip";
  table.name = "filter";
  table.chains.push_back({"INPUT", true, false, policy, std::move(input)});
  table.chains.push_back({"FORWARD", false, true, RuleVerdict::kAccept, {}});
  for (auto& chain : user) table.chains.push_back(std::move(chain));
  return table;
}

struct Case {
  std::string name;
  std::vector<FirewallTable> tables;
  // Expected findings, as "<where>|<rule>|<ports>|definite or may".
  std::vector<std::string> expected;
};

std::string Summary(const FirewallFinding& finding) {
  return finding.where + "|" + finding.rule + "|" + core::DescribePorts(finding.ports) + "|" +
         (finding.definite ? "definite" : "may");
}

TEST(HostFirewallAnalyser, FindsWhatDropsNcclPorts) {
  const RuleVerdict kAccept = RuleVerdict::kAccept, kDrop = RuleVerdict::kDrop,
                    kReject = RuleVerdict::kReject;
  const std::string kInput = "iptables (legacy) filter INPUT";
  const std::vector<Case> cases = {
      {"nothing", {Legacy({})}, {}},
      {"drop of the ephemeral range",
       {Legacy({Tcp("-p tcp --dport 32768:60999 -j DROP", {{32768, 60999}}, kDrop)})},
       {kInput + "|-p tcp --dport 32768:60999 -j DROP|32768-60999|definite"}},
      {"established accepted first does not save a new connection",
       {Legacy({Established(), Tcp("-p tcp -j DROP", {}, kDrop)})},
       {kInput + "|-p tcp -j DROP|29500, 32768-60999|definite"}},
      {"an accept of the ports before the drop saves them",
       {Legacy({Tcp("--dport 1024:65535 -j ACCEPT", {{1024, 65535}}, kAccept),
                Tcp("-j DROP", {}, kDrop)})},
       {}},
      {"an accept of part of the range saves that part only",
       {Legacy({Tcp("--dport 29500 -j ACCEPT", {{29500, 29500}}, kAccept),
                Tcp("--dport 40000:50000 -j ACCEPT", {{40000, 50000}}, kAccept),
                Tcp("-j REJECT", {}, kReject)})},
       {kInput + "|-j REJECT|32768-39999, 50001-60999|definite"}},
      {"a drop overlapping the range partly names the overlap",
       {Legacy({Tcp("--dport 60000:65535 -j DROP", {{60000, 65535}}, kDrop)})},
       {kInput + "|--dport 60000:65535 -j DROP|60000-60999|definite"}},
      {"a drop of other ports is not a finding",
       {Legacy({Tcp("--dport 22 -j DROP", {{22, 22}}, kDrop),
                Tcp("--dport 61000:65535 -j DROP", {{61000, 65535}}, kDrop)})},
       {}},
      {"a negated port condition",
       {Legacy({Tcp("! --dport 22 -j DROP", {{22, 22}}, kDrop, true)})},
       {kInput + "|! --dport 22 -j DROP|29500, 32768-60999|definite"}},
      {"udp only is not TCP",
       {Legacy({[] {
         FirewallRule rule = Tcp("-p udp -j DROP", {}, RuleVerdict::kDrop);
         rule.protocol = 17;
         return rule;
       }()})},
       {}},
      {"a new-only drop counts, an invalid-only drop does not",
       {Legacy({[] {
                  FirewallRule rule = Any("-m state --state INVALID -j DROP", RuleVerdict::kDrop);
                  rule.ct_states = core::kCtInvalid;
                  return rule;
                }(),
                [] {
                  FirewallRule rule = Tcp("--dport 29500 --ctstate NEW -j DROP", {{29500, 29500}},
                                          RuleVerdict::kDrop);
                  rule.ct_states = core::kCtNew;
                  return rule;
                }()})},
       {kInput + "|--dport 29500 --ctstate NEW -j DROP|29500|definite"}},
      {"policy drop with no accept",
       {Legacy({Established()}, kDrop)},
       {kInput + "|policy drop|29500, 32768-60999|definite"}},
      {"policy drop with the ports accepted",
       {Legacy({Established(), Tcp("--dport 1024:65535 -j ACCEPT", {{1024, 65535}}, kAccept)},
               kDrop)},
       {}},
      {"a rule that is not understood is a may",
       {Legacy({NotUnderstood(Tcp("-m mark --mark 1 -j DROP", {}, kDrop), "match 'mark'")})},
       {kInput + "|-m mark --mark 1 -j DROP|29500, 32768-60999|may"}},
      {"an accept not understood makes the drop after it a may",
       {Legacy({NotUnderstood(Any("-m set --match-set ok src -j ACCEPT", kAccept), "match 'set'"),
                Tcp("-j DROP", {}, kDrop)})},
       {kInput + "|-j DROP|29500, 32768-60999|may"}},
      {"a condition that cannot hold (lo) skips the rule",
       {Legacy({[] {
         FirewallRule rule = Any("-i lo -j DROP", RuleVerdict::kDrop);
         rule.other = Tristate::kNo;
         return rule;
       }()})},
       {}},
      {"a jump to a user chain that drops",
       {Legacy({Any("-j ufw-user-input", RuleVerdict::kJump, "ufw-user-input")}, kAccept,
               {{"ufw-user-input",
                 false,
                 false,
                 kAccept,
                 {Tcp("--dport 29500 -j REJECT", {{29500, 29500}}, kReject)}}})},
       {kInput + " -> ufw-user-input|--dport 29500 -j REJECT|29500|definite"}},
      {"a user chain that accepts, then the policy drop",
       {Legacy({Any("-j allow", RuleVerdict::kJump, "allow")}, kDrop,
               {{"allow",
                 false,
                 false,
                 kAccept,
                 {Tcp("--dport 32768:60999 -j ACCEPT", {{32768, 60999}}, kAccept),
                  Any("-j RETURN", RuleVerdict::kReturn)}}})},
       {kInput + "|policy drop|29500|definite"}},
      {"a return before the drop in a user chain",
       {Legacy({Any("-j check", RuleVerdict::kJump, "check")}, kAccept,
               {{"check",
                 false,
                 false,
                 kAccept,
                 {Any("-j RETURN", RuleVerdict::kReturn), Tcp("-j DROP", {}, kDrop)}}})},
       {}},
      {"a jump loop is cut and said as may",
       {Legacy({Any("-j a", RuleVerdict::kJump, "a")}, kAccept,
               {{"a", false, false, kAccept, {Any("-j b", RuleVerdict::kJump, "b")}},
                {"b", false, false, kAccept, {Any("-j a", RuleVerdict::kJump, "a")}}})},
       {kInput + " -> a -> b|-j a|29500, 32768-60999|may"}},
      {"a jump to a chain not read is a may",
       {Legacy({Any("-j missing", RuleVerdict::kJump, "missing")})},
       {kInput + "|-j missing|29500, 32768-60999|may"}},
      {"an unknown target is a may",
       {Legacy({Any("-j NFQUEUE", RuleVerdict::kUnknown)})},
       {kInput + "|-j NFQUEUE|29500, 32768-60999|may"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> got;
    for (const auto& finding : core::FindNcclBlocks(c.tables, kPorts, kPorts))
      got.push_back(Summary(finding));
    EXPECT_EQ(got, c.expected) << c.name;
  }
}

TEST(HostFirewallAnalyser, ForwardAndNftBaseChainsAreWalkedOnTheirPath) {
  FirewallTable nft;
  nft.backend = core::FirewallBackend::kNftables;
  nft.family = "inet";
  nft.name = "filter";
  nft.chains.push_back({"forward",
                        false,
                        true,
                        RuleVerdict::kAccept,
                        {Tcp("tcp dport 32768-60999 drop", {{32768, 60999}}, RuleVerdict::kDrop)}});
  nft.chains.push_back({"input", true, false, RuleVerdict::kAccept, {}});
  FirewallTable ip6 = nft;
  ip6.family = "ip6";  // IPv6 only: not NCCL's IPv4 path
  const core::NcclPorts forward{{{29500, 29500}, {32768, 60999}}};
  const auto findings = core::FindNcclBlocks({nft, ip6}, kPorts, forward);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].path, FirewallPath::kForward);
  EXPECT_EQ(core::DescribeFinding(findings[0]),
            "nft table inet filter chain forward: tcp dport 32768-60999 drop drops new TCP "
            "connections to port(s) 32768-60999 on FORWARD (pod-network pods)");
}

TEST(HostFirewallAnalyser, DefiniteFindingsComeFirstAndMaysSayWhy) {
  FirewallTable table = Legacy({NotUnderstood(Tcp("-m mark -j DROP", {}, RuleVerdict::kDrop),
                                              "match 'mark' is not understood")});
  table.chains[1].rules.push_back(Tcp("-j REJECT", {}, RuleVerdict::kReject));
  const auto findings = core::FindNcclBlocks({table}, kPorts, kPorts);
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_TRUE(findings[0].definite);
  EXPECT_EQ(core::DescribeFinding(findings[0]),
            "iptables (legacy) filter FORWARD: -j REJECT rejects new TCP connections to port(s) "
            "29500, 32768-60999 on FORWARD (pod-network pods)");
  EXPECT_EQ(core::DescribeFinding(findings[1]),
            "iptables (legacy) filter INPUT: -m mark -j DROP may drop new TCP connections to "
            "port(s) 29500, 32768-60999 on INPUT (host-network pods) (match 'mark' is not "
            "understood)");
}

// Many distinct port conditions: past the interval cap the answer is coarser ("may"), never
// wrong, and the walk stays fast.
TEST(HostFirewallAnalyser, ManyPortConditionsStayBoundedAndSound) {
  std::vector<FirewallRule> rules;
  for (int port = 32768; port < 32768 + 2000; ++port) {
    const auto p = static_cast<std::uint16_t>(port);
    rules.push_back(
        Tcp("--dport " + std::to_string(port) + " -j ACCEPT", {{p, p}}, RuleVerdict::kAccept));
  }
  rules.push_back(Tcp("-j DROP", {}, RuleVerdict::kDrop));
  const auto findings = core::FindNcclBlocks({Legacy(rules)}, kPorts, kPorts);
  ASSERT_FALSE(findings.empty());
  for (const auto& finding : findings) EXPECT_EQ(finding.rule, "-j DROP");
}

}  // namespace
}  // namespace ncclguard::test
