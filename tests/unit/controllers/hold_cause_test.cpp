// A held job's guide link is the section of what holds it (controllers::GateVerdict::slug), and
// the same in every place that reports the hold: the NcclPreflight condition, the diagnosis
// insufficient-validated-nodes (its Event and the NcclDiagnosis condition), the Kueue
// AdmissionCheck's message and audit mode's WouldHold condition and Event. One case per cause: a
// node failing each node check this build knows, HyperPod's health verdict, its deep health check,
// too few nodes of the type; and a hold with causes in two sections.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <variant>

#include "controllers/gate.h"
#include "controllers/kueue_check.h"
#include "controllers/training_job_reconciler.h"
#include "core/catalog.h"
#include "core/contract.h"
#include "core/guide.h"
#include "core/hyperpod.h"
#include "tests/unit/controllers/fake_cluster.h"

namespace ncclguard::test::hold_cause_test {
namespace {

using controllers::ApplyObject;
using controllers::Timestamp;
using core::WorkloadKind;
using namespace std::chrono_literals;

const Timestamp kNow =
    std::chrono::sys_days(std::chrono::year(2026) / 12 / 7) + std::chrono::hours(14);
const controllers::JobKey kJob{WorkloadKind::PyTorchJob, "team-a", "llama"};
constexpr std::string_view kSee = " \u2014 see ";

Json Condition(const Json& job, std::string_view type) {
  if (!job.contains("status") || !job["status"].contains("conditions")) return nullptr;
  for (const Json& c : job["status"]["conditions"]) {
    if (c.value("type", "") == type) return c;
  }
  return nullptr;
}

std::string Text(const Json& value) { return value.is_string() ? value.get<std::string>() : ""; }

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Every guide section a text links.
std::set<std::string> LinkedSlugs(const std::string& text) {
  static const std::regex link("guide\\.md#([a-z0-9-]+)");
  std::set<std::string> slugs;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), link); it != std::sregex_iterator();
       ++it) {
    slugs.insert((*it)[1].str());
  }
  return slugs;
}

// What each place that reports the hold said.
struct Reports {
  std::string preflight;   // NcclPreflight message (enforce)
  std::string diagnosis;   // NcclDiagnosis message
  std::string event;       // the InsufficientValidatedNodes Event's note
  std::string kueue;       // the AdmissionCheck entry's message
  std::string would_hold;  // NcclPreflight message in an audit namespace
  std::string would_hold_event;
};

class HoldCause : public ::testing::Test {
 protected:
  void SetUp() override { cluster_.AddNamespace("team-a", true); }

  std::string Link(std::string_view slug) {
    return core::GuideLink(cluster_.Policy().guide_base_url, slug);
  }

  // The job held in enforce mode, the same job queued by Kueue, and the same job in audit mode.
  Reports Hold() {
    Reports reports;
    cluster_.AddJob(P5PyTorchJob("team-a", "llama", 1, true));  // 2 pods x 8 GPUs: 2 nodes
    for (int round = 0; round < 3; ++round) {
      EXPECT_EQ(cluster_.Apply(controllers::ReconcileTrainingJob(kJob, cluster_, kNow).actions), 0);
    }
    const Json& job = cluster_.JobObject(kJob);
    EXPECT_EQ(Text(Condition(job, core::kPreflightCondition)["reason"]),
              "InsufficientValidatedNodes");
    reports.preflight = Text(Condition(job, core::kPreflightCondition)["message"]);
    reports.diagnosis = Text(Condition(job, core::kDiagnosisCondition)["message"]);
    reports.event = EventNote("InsufficientValidatedNodes");

    // The same two pods queued by Kueue.
    const auto checked = controllers::ReconcileWorkloadChecks(
        QueuedP5Workload("team-a", 2, kNow), P5KueueObjects(), cluster_, kNow + 60s);
    for (const auto& action : checked.actions) {
      if (const auto* apply = std::get_if<ApplyObject>(&action)) {
        reports.kueue = Text(apply->object["status"]["admissionChecks"][0]["message"]);
        EXPECT_EQ(apply->object["status"]["admissionChecks"][0]["state"], "Pending");
      }
    }

    cluster_.AddNamespace("team-b", true);
    cluster_.LabelNamespace("team-b", std::string(core::kModeNamespaceLabel), "audit");
    cluster_.AddJob(P5PyTorchJob("team-b", "llama", 1, false));
    const controllers::JobKey audited{WorkloadKind::PyTorchJob, "team-b", "llama"};
    EXPECT_EQ(cluster_.Apply(controllers::ReconcileTrainingJob(audited, cluster_, kNow).actions),
              0);
    const Json& would = Condition(cluster_.JobObject(audited), core::kPreflightCondition);
    EXPECT_EQ(Text(would["reason"]), controllers::kWouldHold);
    reports.would_hold = Text(would["message"]);
    reports.would_hold_event = EventNote(controllers::kWouldHold, "team-b");
    return reports;
  }

  // The note of the Event with `reason` about the job in `ns` ("" when none).
  std::string EventNote(std::string_view reason, const std::string& ns = "team-a") {
    for (const Json& e : cluster_.events()) {
      if (Text(e["reason"]) == reason && Text(e["metadata"]["namespace"]) == ns) {
        return Text(e["note"]);
      }
    }
    return "";
  }

  // Every report ends with the one link of `slug`, and links no other section.
  void ExpectLinkedEverywhere(const Reports& r, std::string_view slug, const std::string& cause) {
    const std::string see = std::string(kSee) + Link(slug);
    for (const auto& [where, text] : {std::pair{"NcclPreflight", &r.preflight},
                                      {"NcclDiagnosis", &r.diagnosis},
                                      {"the Event", &r.event},
                                      {"the Kueue AdmissionCheck", &r.kueue},
                                      {"audit's WouldHold condition", &r.would_hold},
                                      {"audit's WouldHold Event", &r.would_hold_event}}) {
      EXPECT_TRUE(EndsWith(*text, see)) << cause << ": " << where << " says: " << *text;
      EXPECT_EQ(LinkedSlugs(*text), std::set<std::string>{std::string(slug)})
          << cause << ": " << where << " says: " << *text;
    }
    EXPECT_NE(r.preflight.find(cause), std::string::npos) << r.preflight;
    EXPECT_NE(r.event.find(cause), std::string::npos) << r.event;
    EXPECT_NE(r.kueue.find(cause), std::string::npos) << r.kueue;
  }

  FakeCluster cluster_;
};

// A node failing a check of its own section: every node check this build registers.
TEST_F(HoldCause, ANodeFailingEachCheckLinksThatChecksSectionEverywhere) {
  const auto checks = core::Catalog::Of(core::FindingKind::Check);
  ASSERT_FALSE(checks.empty());
  std::set<std::string_view> sections;
  for (const core::CatalogEntry& check : checks) {
    SCOPED_TRACE(std::string(check.id));
    cluster_ = FakeCluster();
    SetUp();
    cluster_.AddNode("ip-10-0-1-7", "p5.48xlarge", "Pass");
    cluster_.AddNode("ip-10-0-1-8", "p5.48xlarge", "Fail",
                     Json::array({{{"id", check.id},
                                   {"status", "Fail"},
                                   {"message", "what " + std::string(check.id) + " saw"}}}));
    ExpectLinkedEverywhere(Hold(), check.slug,
                           "node ip-10-0-1-8 failed " + std::string(check.id) + ": what " +
                               std::string(check.id) + " saw");
    sections.insert(check.slug);
  }
  // Not all one section: the case the diagnosis' own registration used to hide.
  EXPECT_GT(sections.size(), 3u);
}

TEST_F(HoldCause, ANodeHyperPodMarksUnhealthyLinksTheHyperPodSectionEverywhere) {
  cluster_.AddNode("ip-10-0-1-7", "p5.48xlarge", "Pass");
  cluster_.AddNode("ip-10-0-1-8", "p5.48xlarge", "Pass");
  cluster_.NodeObject(
      "ip-10-0-1-8")["metadata"]["labels"][std::string(core::kHyperPodHealthLabel)] =
      "UnschedulablePendingReplacement";
  ExpectLinkedEverywhere(Hold(), "sagemaker-hyperpod",
                         "node ip-10-0-1-8 passed validation but HyperPod marks it "
                         "UnschedulablePendingReplacement");
}

TEST_F(HoldCause, ANodeWhoseDeepHealthCheckFailedLinksTheHyperPodSectionEverywhere) {
  cluster_.AddNode("ip-10-0-1-7", "p5.48xlarge", "Pass");
  cluster_.AddNode("ip-10-0-1-8", "p5.48xlarge", "Pass");
  cluster_.NodeObject(
      "ip-10-0-1-8")["metadata"]["labels"][std::string(core::kHyperPodDeepHealthLabel)] = "Failed";
  ExpectLinkedEverywhere(
      Hold(), "sagemaker-hyperpod",
      "node ip-10-0-1-8 passed validation but its HyperPod deep health check Failed");
}

TEST_F(HoldCause, TooFewNodesOfTheTypeLinkTheGatesOwnSectionEverywhere) {
  cluster_.AddNode("ip-10-0-1-7", "p5.48xlarge", "Pass");
  ExpectLinkedEverywhere(Hold(), controllers::kTooFewNodesSlug, "1/2 p5.48xlarge nodes validated");

  // Not yet validated, or cordoned: still too few, the same section.
  cluster_ = FakeCluster();
  SetUp();
  cluster_.AddNode("ip-10-0-1-7", "p5.48xlarge", "Pass");
  cluster_.AddNode("ip-10-0-1-8", "p5.48xlarge", "Pass", Json::array(), true);
  cluster_.AddNode("ip-10-0-1-9", "p5.48xlarge", "");
  ExpectLinkedEverywhere(Hold(), controllers::kTooFewNodesSlug,
                         "1/2 p5.48xlarge nodes validated; 1 not yet validated, 1 cordoned");
}

// Checks between nodes (core/peer_status.h): two validated nodes that cannot reach each other over
// TCP are held with the host-firewall section, naming both nodes and the port; a fabric failure
// while TCP passes is the security group's section.
TEST_F(HoldCause, NodesThatCannotReachEachOtherOverTcpLinkTheHostFirewallSectionEverywhere) {
  cluster_.AddNode("ip-10-0-1-7", "p5.48xlarge", "Pass");
  cluster_.AddNode("ip-10-0-1-8", "p5.48xlarge", "Pass");
  const std::string detail = "TCP from ip-10-0-1-7 to ip-10-0-1-8 port 40123 timed-out";
  for (const auto& [node, peer] :
       {std::pair{"ip-10-0-1-7", "ip-10-0-1-8"}, std::pair{"ip-10-0-1-8", "ip-10-0-1-7"}}) {
    cluster_.ValidationObject(node)["status"]["peer"] = {{"standing", "Undecided"},
                                                         {"failedWith", {peer}},
                                                         {"failedTier", "tcp"},
                                                         {"failedDetail", detail}};
  }
  ExpectLinkedEverywhere(Hold(), "host-firewall",
                         "0/2 p5.48xlarge nodes validated; nodes ip-10-0-1-7 and ip-10-0-1-8 "
                         "cannot reach each other over TCP: " +
                             detail + "; 1 more failing the checks between nodes");
}

TEST_F(HoldCause, AFabricFailureWhileTcpPassesLinksTheSecurityGroupSectionEverywhere) {
  cluster_.AddNode("ip-10-0-1-7", "p5.48xlarge", "Pass");
  cluster_.AddNode("ip-10-0-1-8", "p5.48xlarge", "Pass");
  cluster_.ValidationObject("ip-10-0-1-7")["status"]["peer"] = {{"standing", "Reachable"}};
  cluster_.ValidationObject("ip-10-0-1-8")["status"]["peer"] = {
      {"standing", "Unreachable"},
      {"failedWith", {"ip-10-0-1-7"}},
      {"failedTier", "fabric"},
      {"failedDetail",
       "the fabric (efa) from ip-10-0-1-7 to ip-10-0-1-8 timed-out while TCP passed"}};
  ExpectLinkedEverywhere(
      Hold(), "security-group",
      "1/2 p5.48xlarge nodes validated; node ip-10-0-1-8 is unreachable by its peers "
      "(ip-10-0-1-7) over the fabric while TCP passes: the fabric (efa) from ip-10-0-1-7 to "
      "ip-10-0-1-8 timed-out while TCP passed");
}

// A node whose probe runs peer checks counts once a round has tested it; a NodeValidation
// without status.peer (no peer checks, or a probe older than them) counts as before.
TEST_F(HoldCause, AnUntestedNodeWaitsForItsPeersAndOneWithoutPeerChecksCountsAsBefore) {
  cluster_.AddNode("ip-10-0-1-7", "p5.48xlarge", "Pass");
  cluster_.AddNode("ip-10-0-1-8", "p5.48xlarge", "Pass");
  cluster_.ValidationObject("ip-10-0-1-8")["status"]["peer"] = {{"standing", "Untested"}};
  ExpectLinkedEverywhere(Hold(), controllers::kTooFewNodesSlug,
                         "1/2 p5.48xlarge nodes validated; 1 not yet tested by their peers");

  cluster_.ValidationObject("ip-10-0-1-8")["status"]["peer"]["standing"] = "Reachable";
  const auto verdict = controllers::EvaluateGate({{"p5.48xlarge", 2}}, cluster_, cluster_.Policy());
  EXPECT_TRUE(verdict.release) << verdict.message;

  // A job of one node does not talk between nodes: a node its peers cannot reach still runs it.
  cluster_.ValidationObject("ip-10-0-1-7")["status"]["peer"] = {{"standing", "Undecided"}};
  cluster_.ValidationObject("ip-10-0-1-8")["status"]["peer"] = {{"standing", "Untested"}};
  const auto one = controllers::EvaluateGate({{"p5.48xlarge", 1}}, cluster_, cluster_.Policy());
  EXPECT_TRUE(one.release) << one.message;
  EXPECT_FALSE(
      controllers::EvaluateGate({{"p5.48xlarge", 2}}, cluster_, cluster_.Policy()).release);
}

TEST_F(HoldCause, CausesInTwoSectionsAreEachNamedWithTheirOwnLink) {
  cluster_.AddNode("ip-10-0-1-6", "p5.48xlarge", "Fail",
                   Json::array({{{"id", "pci-acs"},
                                 {"status", "Fail"},
                                 {"message", "ACS redirects peer-to-peer traffic"}}}));
  cluster_.AddNode("ip-10-0-1-8", "p5.48xlarge", "Pass");
  cluster_.NodeObject(
      "ip-10-0-1-8")["metadata"]["labels"][std::string(core::kHyperPodHealthLabel)] =
      "UnschedulablePendingReplacement";
  const core::CatalogEntry* acs = core::Catalog::Find("pci-acs");
  ASSERT_NE(acs, nullptr);
  ASSERT_NE(acs->slug, "sagemaker-hyperpod");
  const Reports r = Hold();

  const std::string failed = "node ip-10-0-1-6 failed pci-acs: ACS redirects peer-to-peer traffic";
  const std::string unhealthy =
      "node ip-10-0-1-8 passed validation but HyperPod marks it UnschedulablePendingReplacement";
  const std::string both = "0/2 p5.48xlarge nodes validated; " + failed + " (see " +
                           Link(acs->slug) + "); " + unhealthy + " (see " +
                           Link("sagemaker-hyperpod") + ")";
  EXPECT_EQ(r.preflight, both);
  EXPECT_EQ(r.kueue, both);
  EXPECT_TRUE(EndsWith(r.would_hold, both)) << r.would_hold;
  EXPECT_TRUE(EndsWith(r.would_hold_event, both)) << r.would_hold_event;
  // The diagnosis names both, each with its link, and leads with the first cause's section.
  for (const std::string* text : {&r.diagnosis, &r.event}) {
    EXPECT_NE(text->find(both), std::string::npos) << *text;
    EXPECT_TRUE(EndsWith(*text, std::string(kSee) + Link(acs->slug))) << *text;
  }
}

// `explain` says where the section comes from; the registration alone would say §6 for every hold.
TEST(HoldCauseCatalog, TheDiagnosisSaysItsSectionDependsOnTheCause) {
  const core::CatalogEntry* entry = core::Catalog::Find("insufficient-validated-nodes");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->slug, controllers::kTooFewNodesSlug);
  EXPECT_NE(entry->slug_note.find("sagemaker-hyperpod"), std::string_view::npos);
  EXPECT_NE(entry->slug_note.find("failed node check"), std::string_view::npos);
}

}  // namespace
}  // namespace ncclguard::test::hold_cause_test
