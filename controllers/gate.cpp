#include "controllers/gate.h"

#include <algorithm>
#include <map>

#include "controllers/json_fields.h"
#include "controllers/labels.h"
#include "core/catalog.h"
#include "core/guide.h"
#include "core/hyperpod.h"
#include "core/json_access.h"
#include "core/peer_status.h"
#include "core/pod_spec.h"
#include "core/topology.h"
#include "core/workload.h"

namespace ncclguard::controllers {
namespace {

// The guide section of a node check; a check id a NodeValidation names that this build does not
// know, or none, links the gate's own section, where node validation is explained.
std::string_view SlugOf(std::string_view check) {
  const core::CatalogEntry* entry = core::Catalog::Find(check);
  return entry != nullptr ? entry->slug : kTooFewNodesSlug;
}

std::string StatusField(const Json& object, const char* key) {
  const auto status = object.find("status");
  if (status == object.end() || !status->is_object()) return "";
  const auto value = status->find(key);
  return value != status->end() && value->is_string() ? value->get<std::string>() : "";
}

bool Cordoned(const Json& node) {
  const auto spec = node.find("spec");
  if (spec == node.end() || !spec->is_object()) return false;
  const auto unschedulable = spec->find("unschedulable");
  return unschedulable != spec->end() && unschedulable->is_boolean() && unschedulable->get<bool>();
}

// The first failing check of a NodeValidation: its id and what it saw.
void FirstFailure(const Json& validation, std::string& check, std::string& detail) {
  const auto status = validation.find("status");
  if (status == validation.end() || !status->is_object()) return;
  const auto checks = status->find("checks");
  if (checks == status->end() || !checks->is_array()) return;
  for (const Json& result : *checks) {
    if (!result.is_object() || StringField(result, "status") != "Fail") continue;
    check = StringField(result, "id");
    detail = StringField(result, "message");
    if (detail.empty()) {
      detail = "observed " + StringField(result, "observed", "?") + ", expected " +
               StringField(result, "expected", "?");
    }
    return;
  }
}

// The hold's words for the first node whose checks between nodes failed: the nodes, the tier
// and the failed test (its port, or the fabric while TCP passed).
std::string PeerCause(const NodeSupply& s) {
  std::string peers;
  for (const std::string& peer : s.peer_with) peers += (peers.empty() ? "" : ", ") + peer;
  std::string text;
  if (s.peer_standing == core::kPeerUnreachable) {
    text = "node " + s.peer_node + " is unreachable by its peers";
    if (!peers.empty()) text += " (" + peers + ")";
  } else if (!peers.empty()) {
    text = "nodes " + s.peer_node + " and " + peers + " cannot reach each other";
  } else {
    text = "node " + s.peer_node + " fails the checks between nodes";
  }
  if (s.peer_tier == core::kPeerTierFabric) {
    text += " over the fabric while TCP passes";
  } else if (s.peer_tier == core::kPeerTierTcp) {
    text += " over TCP";
  }
  if (!s.peer_detail.empty()) text += ": " + s.peer_detail;
  return text;
}

}  // namespace

std::vector<NodeDemand> NodeDemands(const Json& job, const core::Policy& policy,
                                    const core::RuntimeLookup& runtimes) {
  const auto workload = core::ParseWorkload(job, runtimes);
  if (!workload) return {};
  return NodeDemands(workload->Subject(job), workload->templates, policy);
}

std::vector<NodeDemand> NodeDemands(const Json& job,
                                    const std::vector<core::PodTemplate>& templates,
                                    const core::Policy& policy) {
  struct Need {
    std::int64_t gpus = 0;
    std::int64_t pods = 0;
  };
  std::map<std::string, Need> by_type;
  for (const core::PodTemplate& tmpl : templates) {
    const core::TemplateFacts facts = core::ReadTemplateFacts(job, tmpl, policy);
    std::int64_t gpus_per_pod = 0;
    for (const core::Container& c : facts.containers) gpus_per_pod += c.gpus;
    if (gpus_per_pod == 0 || tmpl.pods == 0 || !facts.instance_type_name) continue;
    Need& need = by_type[*facts.instance_type_name];
    need.gpus += gpus_per_pod * tmpl.pods;
    need.pods += tmpl.pods;
  }
  std::vector<NodeDemand> demands;
  for (const auto& [type, need] : by_type) {
    const core::InstanceType* known = policy.FindInstanceType(type);
    const std::int64_t nodes = known != nullptr && known->gpus > 0
                                   ? (need.gpus + known->gpus - 1) / known->gpus
                                   : need.pods;
    demands.push_back({type, nodes});
  }
  return demands;
}

std::string_view NodeStandingName(NodeStanding standing) {
  switch (standing) {
    case NodeStanding::kValidated:
      return "validated";
    case NodeStanding::kFailed:
      return "failed";
    case NodeStanding::kUnvalidated:
      return "unvalidated";
    case NodeStanding::kCordoned:
      return "cordoned";
    case NodeStanding::kUnhealthy:
      return "unhealthy";
    case NodeStanding::kPeerFailed:
      return "peer-failed";
    case NodeStanding::kPeerUntested:
      return "peer-untested";
  }
  return "unvalidated";
}

NodeFacts FactsOf(const Json* node, const Json* validation) {
  NodeFacts facts;
  if (validation != nullptr) {
    facts.summary = StatusField(*validation, "summary");
    if (facts.summary == "Fail") FirstFailure(*validation, facts.failed_check, facts.failed_detail);
    if (auto peer = core::PeerBlockOf(*validation)) {
      facts.peer_standing = std::move(peer->standing);
      facts.peer_with = std::move(peer->failed_with);
      facts.peer_tier = std::move(peer->failed_tier);
      facts.peer_detail = std::move(peer->failed_detail);
    }
  }
  if (node != nullptr) {
    const auto metadata = node->find("metadata");
    if (metadata != node->end() && metadata->is_object()) {
      const core::NodeTopology topology =
          core::ReadNodeTopology(metadata->value("labels", Json::object()));
      if (const core::TopologyLevel* closest = topology.Deepest()) {
        facts.block = core::NetworkLayerName(closest->layer) + " " + closest->block;
      }
    }
    facts.cordoned = Cordoned(*node);
    facts.hyperpod_node_health = core::HyperPodUnhealthy(*node, {true, false});
    facts.hyperpod_deep_health = core::HyperPodUnhealthy(*node, {false, true});
  }
  return facts;
}

NodeStanding StandingOf(const NodeFacts& facts, const core::Policy& policy, bool count_unvalidated,
                        std::string* unhealthy_why) {
  if (facts.summary == "Fail") return NodeStanding::kFailed;
  const bool validated = facts.summary == "Pass" || facts.summary == "Warn" ||
                         (facts.summary.empty() && count_unvalidated);
  // A summary we do not know: treated as not yet validated.
  if (!validated) return NodeStanding::kUnvalidated;
  if (facts.cordoned) return NodeStanding::kCordoned;
  // HyperPod's health verdict first, then its deep health check (core::HyperPodUnhealthy).
  const std::optional<std::string>& why =
      policy.gate.hyperpod.node_health && facts.hyperpod_node_health ? facts.hyperpod_node_health
      : policy.gate.hyperpod.deep_health_check                       ? facts.hyperpod_deep_health
                                                                     : std::nullopt;
  if (why) {
    if (unhealthy_why != nullptr) *unhealthy_why = *why;
    return NodeStanding::kUnhealthy;
  }
  if (facts.peer_standing == core::kPeerUntested) return NodeStanding::kPeerUntested;
  if (!core::PeerStandingCounts(facts.peer_standing)) return NodeStanding::kPeerFailed;
  return NodeStanding::kValidated;
}

NodeStanding StandingOf(const Json& node, const Json* validation, const core::Policy& policy,
                        bool count_unvalidated, std::string* unhealthy_why) {
  return StandingOf(FactsOf(&node, validation), policy, count_unvalidated, unhealthy_why);
}

namespace {

// Counts the node in the supply by its standing; `why` receives HyperPod's word.
void TallyStanding(NodeSupply& supply, std::string_view name, const NodeFacts& facts,
                   const core::Policy& policy, std::string& why) {
  switch (StandingOf(facts, policy, policy.gate.count_unvalidated_nodes, &why)) {
    case NodeStanding::kValidated:
      ++supply.counted;
      break;
    case NodeStanding::kFailed:
      if (supply.failed++ == 0) {
        supply.failed_node = name;
        supply.failed_check = facts.failed_check;
        supply.failed_detail = facts.failed_detail;
      }
      break;
    case NodeStanding::kUnvalidated:
      ++supply.unprobed;
      break;
    case NodeStanding::kCordoned:
      ++supply.cordoned;
      break;
    case NodeStanding::kUnhealthy:
      if (supply.hyperpod_unhealthy++ == 0) {
        supply.unhealthy_node = name;
        supply.unhealthy_why = std::move(why);
      }
      break;
    case NodeStanding::kPeerFailed:
      // A job of one node does not talk between nodes: its peers' verdict does not hold it.
      if (supply.needed <= 1) {
        ++supply.counted;
        break;
      }
      if (supply.peer_failed++ == 0) {
        supply.peer_node = name;
        supply.peer_standing = facts.peer_standing;
        supply.peer_with = facts.peer_with;
        supply.peer_tier = facts.peer_tier;
        supply.peer_detail = facts.peer_detail;
      }
      break;
    case NodeStanding::kPeerUntested:
      if (supply.needed <= 1) {
        ++supply.counted;
      } else {
        ++supply.peer_untested;
      }
      break;
  }
}

}  // namespace

std::pair<std::string, std::int64_t> NodeSupply::LargestBlock() const {
  std::pair<std::string, std::int64_t> largest{"", 0};
  for (const auto& [block, count] : counted_by_block) {
    if (count > largest.second) largest = {block, count};
  }
  return largest;
}

void Tally(NodeSupply& supply, std::string_view name, const NodeFacts& facts,
           const core::Policy& policy) {
  std::string why;
  const std::int64_t before = supply.counted;
  TallyStanding(supply, name, facts, policy, why);
  if (supply.counted > before && !facts.block.empty()) ++supply.counted_by_block[facts.block];
}

NodeSupply CountNodes(const NodeDemand& demand, const ClusterView& view,
                      const core::Policy& policy) {
  if (auto indexed = view.IndexedSupply(demand)) return *std::move(indexed);
  NodeSupply supply;
  supply.instance_type = demand.instance_type;
  supply.needed = demand.nodes;
  std::vector<Json> nodes = view.NodesWithLabel(core::kInstanceTypeLabel, demand.instance_type);
  std::sort(nodes.begin(), nodes.end(),
            [](const Json& a, const Json& b) { return Meta(a, "name") < Meta(b, "name"); });
  for (const Json& node : nodes) {
    const std::string name = Meta(node, "name");
    const auto validation = view.NodeValidation(name);
    Tally(supply, name, FactsOf(&node, validation ? &*validation : nullptr), policy);
  }
  return supply;
}

GateVerdict EvaluateGate(const std::vector<NodeDemand>& demands, const ClusterView& view,
                         const core::Policy& policy) {
  if (demands.empty()) {
    return {true, "NoValidationNeeded",
            "no GPU pod template with a known instance type: the gate does not apply"};
  }
  // The held types' parts in order: a count, then its causes, then the other nodes' standing.
  struct Part {
    std::string text;
    std::optional<std::string_view> slug;  // set for a cause
  };
  std::vector<Part> parts;
  std::string admitted;
  for (const NodeDemand& demand : demands) {
    const NodeSupply s = CountNodes(demand, view, policy);
    // Required in one block: the block with the most validated nodes is what counts.
    const auto [block, in_block] = s.LargestBlock();
    const bool one_block = demand.one_block && s.needed > 1;
    if (one_block ? in_block >= s.needed : s.counted >= s.needed) {
      if (!admitted.empty()) admitted += "; ";
      admitted += std::to_string(s.counted) + " validated " + s.instance_type + " nodes for " +
                  std::to_string(s.needed) + " needed";
      if (one_block) admitted += ", " + std::to_string(in_block) + " in " + block;
      continue;
    }
    if (one_block && s.counted >= s.needed) {
      // Enough nodes, none of the blocks enough of them.
      const std::size_t space = block.find(' ');
      parts.push_back(
          {std::to_string(s.counted) + " validated " + s.instance_type + " nodes, at most " +
               std::to_string(in_block) + " in one " +
               (block.empty() ? std::string("network block") : block.substr(0, space) + " block") +
               ", " + std::to_string(s.needed) +
               " needed in one (NcclPolicy spec.placement required)",
           std::string_view("advanced-tuning")});
      continue;
    }
    parts.push_back({std::to_string(s.counted) + "/" + std::to_string(s.needed) + " " +
                         s.instance_type + " nodes validated",
                     std::nullopt});
    if (!s.failed_node.empty()) {
      std::string text = "node " + s.failed_node + " failed";
      if (!s.failed_check.empty()) text += " " + s.failed_check + ": " + s.failed_detail;
      parts.push_back({std::move(text), SlugOf(s.failed_check)});
    }
    if (!s.unhealthy_node.empty()) {
      std::string text = "node " + s.unhealthy_node + " passed validation but " + s.unhealthy_why;
      if (s.hyperpod_unhealthy > 1) {
        text += " (" + std::to_string(s.hyperpod_unhealthy - 1) + " more HyperPod marks unhealthy)";
      }
      parts.push_back({std::move(text), std::string_view("sagemaker-hyperpod")});
    }
    if (!s.peer_node.empty()) {
      parts.push_back({PeerCause(s), core::PeerFailureSlug(s.peer_tier)});
    }
    std::string others;
    const auto other = [&](std::int64_t count, std::string_view what) {
      if (count <= 0) return;
      if (!others.empty()) others += ", ";
      others += std::to_string(count) + " " + std::string(what);
    };
    other(s.failed - 1, "more failed validation");
    other(s.unprobed, "not yet validated");
    other(s.cordoned, "cordoned");
    other(s.peer_failed - 1, "more failing the checks between nodes");
    other(s.peer_untested, "not yet tested by their peers");
    if (!others.empty()) parts.push_back({std::move(others), std::nullopt});
  }
  if (parts.empty()) return {true, "ValidatedNodesAvailable", admitted};

  // The first cause's section leads; causes of several sections each carry their own link.
  std::vector<std::string_view> slugs;
  for (const Part& part : parts) {
    if (part.slug && std::find(slugs.begin(), slugs.end(), *part.slug) == slugs.end()) {
      slugs.push_back(*part.slug);
    }
  }
  GateVerdict verdict{false, "InsufficientValidatedNodes", "",
                      slugs.empty() ? kTooFewNodesSlug : slugs.front(), ""};
  for (const Part& part : parts) {
    if (!verdict.held_for.empty()) verdict.held_for += "; ";
    verdict.held_for += part.text;
    if (slugs.size() > 1 && part.slug) {
      verdict.held_for += " (see " + core::GuideLink(policy.guide_base_url, *part.slug) + ")";
    }
  }
  verdict.message = slugs.size() > 1 ? verdict.held_for
                                     : verdict.held_for + " \u2014 see " +
                                           core::GuideLink(policy.guide_base_url, verdict.slug);
  return verdict;
}

namespace {

// Calls fn with the labels of namespace `namespace_` (null when it is not known or has none).
template <typename Fn>
auto WithNamespaceLabels(const ClusterView& view, std::string_view namespace_, Fn&& fn) {
  const auto ns = view.Namespace(namespace_);
  const Json* metadata = ns ? core::Member(*ns, "metadata") : nullptr;
  return fn(metadata != nullptr ? core::Member(*metadata, "labels") : nullptr);
}

}  // namespace

core::Mode NamespaceMode(const ClusterView& view, std::string_view namespace_) {
  return WithNamespaceLabels(
      view, namespace_, [&](const Json* labels) { return core::ModeIn(view.Policy(), labels); });
}

core::PlacementMode NamespacePlacement(const ClusterView& view, std::string_view namespace_) {
  return WithNamespaceLabels(view, namespace_, [&](const Json* labels) {
    return core::PlacementModeIn(view.Policy().placement, labels);
  });
}

}  // namespace ncclguard::controllers
