#include "core/peer_status.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <map>

namespace ncclguard::core {
namespace {

std::string Text(const Json& object, const char* key) {
  const auto found = object.find(key);
  return found != object.end() && found->is_string() ? found->get<std::string>() : "";
}

std::uint64_t Unsigned(const Json& object, const char* key) {
  const auto found = object.find(key);
  if (found == object.end() || !found->is_number_integer()) return 0;
  return found->is_number_unsigned() || found->get<std::int64_t>() >= 0
             ? found->get<std::uint64_t>()
             : 0;
}

double Number(const Json& object, const char* key) {
  const auto found = object.find(key);
  return found != object.end() && found->is_number() ? found->get<double>() : 0;
}

std::uint16_t Port(std::uint64_t value) {
  return value <= 65535 ? static_cast<std::uint16_t>(value) : 0;
}

// [first, last] of a port range field; left as they are when it is not two ports.
void Range(const Json& peer, const char* key, std::uint16_t& first, std::uint16_t& last) {
  const auto range = peer.find(key);
  if (range == peer.end() || !range->is_array() || range->size() != 2) return;
  const Json& a = (*range)[0];
  const Json& b = (*range)[1];
  if (!a.is_number_integer() || !b.is_number_integer() || a.get<std::int64_t>() < 0 ||
      b.get<std::int64_t>() < 0) {
    return;
  }
  first = Port(a.get<std::uint64_t>());
  last = Port(b.get<std::uint64_t>());
}

Json TestJson(const PeerTestResult& test) {
  Json out{{"peer", test.peer},
           {"pass", test.pass},
           {"tier", test.tier},
           {"result", test.result},
           {"milliseconds", test.milliseconds}};
  if (!test.path.empty()) out["path"] = test.path;
  if (!test.ports.empty()) out["ports"] = test.ports;
  if (test.failed_port != 0) out["failedPort"] = test.failed_port;
  if (!test.provider.empty()) out["provider"] = test.provider;
  if (!test.detail.empty()) out["detail"] = test.detail;
  return out;
}

PeerTestResult TestOf(const Json& item) {
  PeerTestResult test;
  test.peer = Text(item, "peer");
  test.pass = Text(item, "pass");
  test.tier = Text(item, "tier");
  test.path = Text(item, "path");
  test.result = Text(item, "result");
  test.passed = test.result == "passed";
  test.ports = Text(item, "ports");
  test.failed_port = Port(Unsigned(item, "failedPort"));
  test.provider = Text(item, "provider");
  test.milliseconds = Number(item, "milliseconds");
  test.detail = Text(item, "detail");
  return test;
}

// The published tests of `round`, by client: only blocks of that round count.
std::map<std::string_view, const PeerBlock*> PublishedIn(std::span<const PeerMember> members,
                                                         std::uint64_t round) {
  std::map<std::string_view, const PeerBlock*> by_client;
  for (const PeerMember& member : members) {
    if (member.block.round == round) by_client[member.node] = &member.block;
  }
  return by_client;
}

// A planned test's outcome: failed when its client published a failed test of it in that pass.
bool Passed(const std::map<std::string_view, const PeerBlock*>& published, const PeerPair& pair,
            std::string_view pass) {
  const auto found = published.find(pair.client);
  if (found == published.end()) return true;
  for (const PeerTestResult& test : found->second->tests) {
    if (test.peer == pair.server && test.pass == pass && !test.passed) return false;
  }
  return true;
}

std::vector<PeerOutcome> Outcomes(const std::vector<PeerPair>& pairs,
                                  const std::map<std::string_view, const PeerBlock*>& published,
                                  std::string_view pass) {
  std::vector<PeerOutcome> outcomes;
  outcomes.reserve(pairs.size());
  for (const PeerPair& pair : pairs) {
    outcomes.push_back({pair.client, pair.server, Passed(published, pair, pass)});
  }
  return outcomes;
}

std::string Describe(const std::string& client, const PeerTestResult& test) {
  if (test.tier == kPeerTierTcp) {
    std::string text = std::string(test.path == kPeerPathHost ? "TCP host to host" : "TCP") +
                       " from " + client + " to " + test.peer;
    if (test.failed_port != 0) text += " port " + std::to_string(test.failed_port);
    return text + " " + test.result + (test.detail.empty() ? "" : " (" + test.detail + ")");
  }
  return "the fabric (" + (test.provider.empty() ? std::string("libfabric") : test.provider) +
         ") from " + client + " to " + test.peer + " " + test.result;
}

}  // namespace

std::string PeerGroupOf(std::string_view instance_type, std::string_view block) {
  std::string group;
  const auto append = [&group](std::string_view text) {
    for (const char c : text) {
      const bool allowed =
          std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == '_';
      group += allowed ? c : '_';
    }
  };
  append(instance_type);
  if (!block.empty()) {
    group += '_';
    append(block);
  }
  // A label value starts and ends with an alphanumeric.
  const auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (group.empty()) return "none";
  if (group.size() <= 63 && alnum(group.front()) && alnum(group.back())) return group;
  std::uint64_t hash = 1469598103934665603ULL;  // FNV-1a over what the group is made of
  for (const char c : std::string(instance_type) + '\n' + std::string(block)) {
    hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  }
  char text[20];
  std::snprintf(text, sizeof text, "g-%016llx", static_cast<unsigned long long>(hash));
  return text;
}

bool PeerStandingCounts(std::string_view standing) {
  return standing.empty() || standing == kPeerReachable || standing == kPeerAlone;
}

std::string_view PeerFailureSlug(std::string_view tier) {
  return tier == kPeerTierFabric ? "security-group" : "host-firewall";
}

Json PeerBlockJson(const PeerBlock& block) {
  Json tests = Json::array();
  for (const PeerTestResult& test : block.tests) tests.push_back(TestJson(test));
  Json out{{"path", block.path},
           {"address", block.address},
           {"portRange", Json::array({block.port_first, block.port_last})},
           {"hostAddress", block.host_address},
           {"hostPortRange", Json::array({block.host_port_first, block.host_port_last})},
           {"periodSeconds", block.period_seconds},
           {"round", block.round},
           {"tests", std::move(tests)},
           {"standing", block.standing},
           {"judgedRound", block.judged_round},
           {"failedWith", block.failed_with},
           {"failedTier", block.failed_tier},
           {"failedDetail", block.failed_detail},
           {"message", block.message}};
  if (!block.fabric_provider.empty()) {
    out["fabric"] = {{"provider", block.fabric_provider}, {"address", block.fabric_address}};
  } else {
    out["fabric"] = nullptr;  // a merge patch removes a former one
  }
  return out;
}

std::optional<PeerBlock> PeerBlockOf(const Json& validation) {
  const auto status = validation.find("status");
  if (status == validation.end() || !status->is_object()) return std::nullopt;
  const auto peer = status->find("peer");
  if (peer == status->end() || !peer->is_object()) return std::nullopt;
  PeerBlock block;
  block.path = Text(*peer, "path");
  block.address = Text(*peer, "address");
  Range(*peer, "portRange", block.port_first, block.port_last);
  block.host_address = Text(*peer, "hostAddress");
  Range(*peer, "hostPortRange", block.host_port_first, block.host_port_last);
  const auto fabric = peer->find("fabric");
  if (fabric != peer->end() && fabric->is_object()) {
    block.fabric_provider = Text(*fabric, "provider");
    block.fabric_address = Text(*fabric, "address");
  }
  block.period_seconds = Unsigned(*peer, "periodSeconds");
  block.round = Unsigned(*peer, "round");
  const auto tests = peer->find("tests");
  if (tests != peer->end() && tests->is_array()) {
    for (const Json& item : *tests) {
      if (item.is_object()) block.tests.push_back(TestOf(item));
    }
  }
  block.standing = Text(*peer, "standing");
  block.judged_round = Unsigned(*peer, "judgedRound");
  const auto failed_with = peer->find("failedWith");
  if (failed_with != peer->end() && failed_with->is_array()) {
    for (const Json& name : *failed_with) {
      if (name.is_string()) block.failed_with.push_back(name.get<std::string>());
    }
  }
  block.failed_tier = Text(*peer, "failedTier");
  block.failed_detail = Text(*peer, "failedDetail");
  block.message = Text(*peer, "message");
  return block;
}

std::vector<PeerOutcome> FirstPassOf(std::span<const std::string> nodes,
                                     std::span<const PeerMember> members, std::uint64_t round) {
  return Outcomes(RingPass(nodes, round), PublishedIn(members, round), kPeerPassRing);
}

RoundOutcomes OutcomesOf(std::span<const std::string> nodes, std::span<const PeerMember> members,
                         std::uint64_t round) {
  const auto published = PublishedIn(members, round);
  RoundOutcomes outcomes;
  outcomes.first = Outcomes(RingPass(nodes, round), published, kPeerPassRing);
  outcomes.second =
      Outcomes(CulpritPass(nodes, outcomes.first, round), published, kPeerPassCulprit);
  return outcomes;
}

PeerJudgement JudgeSelf(std::string_view self, std::span<const std::string> nodes,
                        std::span<const PeerMember> members, std::uint64_t round, bool tested) {
  PeerJudgement judgement;
  if (nodes.size() < 2) {
    judgement.standing = kPeerAlone;
    judgement.message = "the only node of its instance type in the group: nothing to test";
    return judgement;
  }
  const RoundOutcomes outcomes = OutcomesOf(nodes, members, round);
  const std::vector<PeerVerdict> verdicts = JudgePeers(nodes, outcomes.first, outcomes.second);
  const auto mine = std::find_if(verdicts.begin(), verdicts.end(),
                                 [&](const PeerVerdict& v) { return v.node == self; });
  if (mine == verdicts.end() || !tested) {
    judgement.standing = kPeerUntested;
    judgement.message = "no test between this node and a peer has run yet";
    return judgement;
  }
  judgement.failed_with = mine->failed_with;
  // The words of one failed test it took part in, TCP first: a TCP failure explains a fabric
  // failure beside it (the tcp provider moves data over TCP too), not the other way round.
  const PeerTestResult* tcp = nullptr;
  const PeerTestResult* fabric = nullptr;
  std::string tcp_client;
  std::string fabric_client;
  for (const PeerMember& member : members) {
    if (member.block.round != round) continue;
    for (const PeerTestResult& test : member.block.tests) {
      if (test.passed || (member.node != self && test.peer != self)) continue;
      if (test.tier == kPeerTierTcp && tcp == nullptr) {
        tcp = &test;
        tcp_client = member.node;
      } else if (test.tier == kPeerTierFabric && fabric == nullptr) {
        fabric = &test;
        fabric_client = member.node;
      }
    }
  }
  if (tcp != nullptr) {
    judgement.failed_tier = kPeerTierTcp;
    judgement.failed_detail = Describe(tcp_client, *tcp);
  } else if (fabric != nullptr) {
    judgement.failed_tier = kPeerTierFabric;
    judgement.failed_detail = Describe(fabric_client, *fabric) + " while TCP passed";
  }
  std::string peers;
  for (const std::string& peer : mine->failed_with) peers += (peers.empty() ? "" : ", ") + peer;
  switch (mine->standing) {
    case PeerStanding::kReachable:
      judgement.standing = kPeerReachable;
      judgement.message = "its peers reach it and it reaches them";
      judgement.failed_with.clear();
      judgement.failed_tier.clear();
      judgement.failed_detail.clear();
      break;
    case PeerStanding::kUnreachable:
      judgement.standing = kPeerUnreachable;
      judgement.message = "fails with nodes that pass with others: " + judgement.failed_detail;
      break;
    case PeerStanding::kPairFault:
      judgement.standing = kPeerPairFault;
      judgement.message = "fails with " + peers + " only: " + judgement.failed_detail;
      break;
    case PeerStanding::kUndecided:
      judgement.standing = kPeerUndecided;
      judgement.message =
          "a test with " + peers +
          " failed and no other node tells which side is at fault: " + judgement.failed_detail;
      break;
  }
  return judgement;
}

}  // namespace ncclguard::core
