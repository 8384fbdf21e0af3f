// The objects the probe publishes (docs/contract.md): NodeValidation named after the node, the
// ncclguard.io/validated label and the NcclReady condition.
#include <gtest/gtest.h>

#include "probes/node_validation.h"
#include "tests/unit/probes/probe_test_support.h"

namespace ncclguard::test {
namespace {

using core::Json;
using probes::CheckStatus;

probes::ProbeReport Report(CheckStatus worst) {
  probes::ProbeReport report;
  report.node_name = "ip-10-0-0-1.ec2.internal";
  report.instance_type = "p5.48xlarge";
  report.probe_version = "0.1.0";
  report.probe_time = std::chrono::system_clock::from_time_t(1796220000);  // 2026-12-02T14:00Z
  auto pass = probes::Result(CheckStatus::Pass, "32", "32", "ok");
  pass.id = "efa-device-count";
  pass.guide = "g#efa-config";
  report.checks.push_back(pass);
  if (worst != CheckStatus::Pass) {
    auto other = probes::Result(worst, "RemoveIPC=yes", "RemoveIPC=no", "logind removes");
    other.id = "removeipc";
    other.guide = "g#stale-shm";
    other.suggested_command = "sed -i ...";
    other.blast_radius = "logind only";
    report.checks.push_back(other);
  }
  report.summary = probes::Summarize(report.checks);
  return report;
}

TEST(NodeValidation, ObjectIsClusterScopedAndNamedAfterTheNode) {
  const Json object = probes::NodeValidationObject(Report(CheckStatus::Warn));
  EXPECT_EQ(object["apiVersion"], "ncclguard.io/v1alpha1");
  EXPECT_EQ(object["kind"], "NodeValidation");
  EXPECT_EQ(object["metadata"], Json({{"name", "ip-10-0-0-1.ec2.internal"}}));
  const Json& status = object["status"];
  EXPECT_EQ(status["instanceType"], "p5.48xlarge");
  EXPECT_EQ(status["summary"], "Warn");
  EXPECT_EQ(status["lastProbeTime"], "2026-12-02T14:00:00Z");
  EXPECT_EQ(status["probeVersion"], "0.1.0");
  ASSERT_EQ(status["checks"].size(), 2u);
  EXPECT_EQ(status["checks"][0], Json({{"id", "efa-device-count"},
                                       {"status", "Pass"},
                                       {"observed", "32"},
                                       {"expected", "32"},
                                       {"message", "ok"},
                                       {"guide", "g#efa-config"}}));
  EXPECT_EQ(status["checks"][1]["suggestedCommand"], "sed -i ...");
  EXPECT_EQ(status["checks"][1]["blastRadius"], "logind only");
}

TEST(NodeValidation, ReportWithoutNodeNameCannotBePublished) {
  auto report = Report(CheckStatus::Pass);
  report.node_name.clear();
  EXPECT_THROW(probes::NodeValidationObject(report), std::invalid_argument);
}

TEST(NodeValidation, ValidatedLabelIsFalseOnlyOnAFail) {
  EXPECT_EQ(probes::ValidatedLabelValue(Report(CheckStatus::Pass)), "true");
  EXPECT_EQ(probes::ValidatedLabelValue(Report(CheckStatus::Warn)), "true");
  EXPECT_EQ(probes::ValidatedLabelValue(Report(CheckStatus::Fail)), "false");
  EXPECT_EQ(probes::NodeLabelPatch(Report(CheckStatus::Fail)),
            Json::parse(R"({"metadata":{"labels":{"ncclguard.io/validated":"false"}}})"));
}

TEST(NodeValidation, ReadyConditionNamesTheFailedChecks) {
  const auto now = std::chrono::system_clock::from_time_t(1796223600);  // 15:00Z
  const Json condition = probes::NcclReadyCondition(Report(CheckStatus::Fail), nullptr, now);
  EXPECT_EQ(condition["type"], "NcclReady");
  EXPECT_EQ(condition["status"], "False");
  EXPECT_EQ(condition["reason"], "ChecksFailed");
  EXPECT_EQ(condition["message"],
            "failed: removeipc (kubectl get nodevalidation ip-10-0-0-1.ec2.internal -o yaml)");
  EXPECT_EQ(condition["lastHeartbeatTime"], "2026-12-02T15:00:00Z");
  EXPECT_EQ(condition["lastTransitionTime"], "2026-12-02T15:00:00Z");

  const Json warned = probes::NcclReadyCondition(Report(CheckStatus::Warn), nullptr, now);
  EXPECT_EQ(warned["status"], "True");
  EXPECT_EQ(warned["reason"], "ChecksPassedWithWarnings");
}

TEST(NodeValidation, TransitionTimeMovesOnlyWhenTheStatusChanges) {
  const Json node = Json::parse(R"({"status":{"conditions":[
      {"type":"Ready","status":"True"},
      {"type":"NcclReady","status":"True","lastTransitionTime":"2026-12-01T00:00:00Z"}]}})");
  const Json previous = probes::FindNodeCondition(node, "NcclReady");
  ASSERT_TRUE(previous.is_object());
  const auto now = std::chrono::system_clock::from_time_t(1796223600);
  EXPECT_EQ(
      probes::NcclReadyCondition(Report(CheckStatus::Pass), previous, now)["lastTransitionTime"],
      "2026-12-01T00:00:00Z");
  EXPECT_EQ(
      probes::NcclReadyCondition(Report(CheckStatus::Fail), previous, now)["lastTransitionTime"],
      "2026-12-02T15:00:00Z");
  EXPECT_TRUE(probes::FindNodeCondition(Json::parse(R"({"status":{}})"), "NcclReady").is_null());
  EXPECT_TRUE(probes::FindNodeCondition(Json("garbage"), "NcclReady").is_null());
}

TEST(NodeValidation, ConditionPatchTouchesOnlyNcclReady) {
  const Json condition = {{"type", "NcclReady"}, {"status", "True"}};
  EXPECT_EQ(probes::NodeConditionPatch(condition),
            Json::parse(R"({"status":{"conditions":[{"type":"NcclReady","status":"True"}]}})"));
}

}  // namespace
}  // namespace ncclguard::test
