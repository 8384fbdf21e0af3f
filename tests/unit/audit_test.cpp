// The audit's results (core/audit.h) and the PolicyReports built of them (core/policy_report.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "core/audit.h"
#include "core/contract.h"
#include "core/errors.h"
#include "core/policy.h"
#include "core/policy_report.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

core::Json Example(const std::string& name) {
  return Yaml(ReadFile(SourcePath("examples/" + name)));
}

core::Json BrokenPod() {
  core::Json pod = CompliantPod();
  pod["metadata"]["uid"] = "u-1";
  for (auto& container : pod["spec"]["containers"]) {
    container["resources"]["limits"].erase("vpc.amazonaws.com/efa");
    container["resources"]["requests"].erase("vpc.amazonaws.com/efa");
  }
  return pod;
}

std::set<std::string> Rules(const core::ObjectAudit& audit) {
  std::set<std::string> rules;
  for (const auto& finding : audit.findings) rules.insert(finding.finding.rule);
  return rules;
}

TEST(Audit, ACompliantGpuPodPasses) {
  const auto audit = core::AuditObject(CompliantPod(), core::Policy::Defaults());
  ASSERT_TRUE(audit.has_value());
  EXPECT_TRUE(audit->findings.empty());
  EXPECT_EQ(audit->Result(), core::AuditResult::Pass);
  EXPECT_EQ(audit->object.kind, "Pod");
}

TEST(Audit, APodMissingAFixFailsSinceNothingFixesARunningPod) {
  const auto audit = core::AuditObject(BrokenPod(), core::Policy::Defaults());
  ASSERT_TRUE(audit.has_value());
  ASSERT_TRUE(Rules(*audit).contains("efa-resources-missing"));
  for (const auto& finding : audit->findings) {
    if (finding.finding.level == core::Level::Fix) {
      EXPECT_EQ(finding.result, core::AuditResult::Fail) << finding.finding.rule;
      EXPECT_EQ(finding.severity, "medium");
    }
  }
  EXPECT_EQ(audit->Result(), core::AuditResult::Fail);
}

TEST(Audit, AJobsFixesWarnSinceItsPodsAreFixedWhenCreatedAndItsDenialsFail) {
  const auto audit = core::AuditObject(Example("pytorchjob-denied.yaml"), core::Policy::Defaults());
  ASSERT_TRUE(audit.has_value());
  bool denied = false;
  for (const auto& finding : audit->findings) {
    if (finding.finding.level == core::Level::Fix) {
      EXPECT_EQ(finding.result, core::AuditResult::Warn) << finding.finding.rule;
    }
    if (finding.finding.level == core::Level::Deny) {
      denied = true;
      EXPECT_EQ(finding.result, core::AuditResult::Fail);
      EXPECT_EQ(finding.severity, "high");
    }
  }
  EXPECT_TRUE(denied);
}

TEST(Audit, AJobWhosePodsTheControllerFoundSpreadWarnsWithItsMessageAndOneInOneBlockDoesNot) {
  core::Json job = Example("pytorchjob-p5.yaml");
  const std::string spread_message =
      "4 pods on 4 nodes in 2 network-node-layer-3 blocks: nn-a 3 nodes, nn-b 1 node";
  job["status"]["conditions"] = core::Json::array({{{"type", "NcclPlacement"},
                                                    {"status", "False"},
                                                    {"reason", "Spread"},
                                                    {"message", spread_message}}});
  const auto spread = core::AuditObject(job, core::Policy::Defaults());
  ASSERT_TRUE(spread.has_value());
  const auto found = std::find_if(
      spread->findings.begin(), spread->findings.end(),
      [](const core::AuditFinding& f) { return f.finding.rule == "topology-placement"; });
  ASSERT_NE(found, spread->findings.end());
  EXPECT_EQ(found->result, core::AuditResult::Warn);
  EXPECT_EQ(found->severity, "low");
  EXPECT_EQ(
      found->finding.message,
      "its pods are spread across network blocks (condition NcclPlacement): " + spread_message);
  EXPECT_NE(found->finding.guide.find("#advanced-tuning"), std::string::npos);

  job["status"]["conditions"][0] = {{"type", "NcclPlacement"},
                                    {"status", "True"},
                                    {"reason", "OneBlock"},
                                    {"message", "in one block"}};
  const auto packed = core::AuditObject(job, core::Policy::Defaults());
  ASSERT_TRUE(packed.has_value());
  EXPECT_FALSE(Rules(*packed).contains("topology-placement"));
}

TEST(Audit, PodsWithoutGpusAndObjectsMadeByAJobAreNotAudited) {
  core::Json web = Yaml(R"(
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec: {containers: [{name: web, image: nginx}]}
)");
  EXPECT_FALSE(core::AuditObject(web, core::Policy::Defaults()).has_value());
  core::Json child = Example("indexed-job-p5.yaml");
  child["metadata"]["ownerReferences"] =
      core::Json::array({{{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
                          {"kind", "JobSet"},
                          {"name", "js"},
                          {"uid", "u"},
                          {"controller", true}}});
  EXPECT_FALSE(core::AuditObject(child, core::Policy::Defaults()).has_value());
  EXPECT_TRUE(core::AuditObject(Example("indexed-job-p5.yaml"), core::Policy::Defaults()));
  EXPECT_FALSE(core::AuditObject(core::Json{{"apiVersion", "v1"}, {"kind", "ConfigMap"}},
                                 core::Policy::Defaults()));
}

TEST(Audit, AFieldOfTheWrongTypeIsAnInputErrorNotACrash) {
  core::Json pod = CompliantPod();
  pod["spec"]["containers"] = "not a list";
  EXPECT_THROW(core::AuditObject(pod, core::Policy::Defaults()), core::InputError);
}

TEST(PolicyReport, AResultNamesTheRuleTheObjectAndTheGuide) {
  const auto audit = core::AuditObject(BrokenPod(), core::Policy::Defaults());
  ASSERT_TRUE(audit.has_value());
  const auto reports = core::PolicyReportsFor("ml", {*audit});
  ASSERT_EQ(reports.size(), 1u);
  const core::Json& report = reports[0];
  EXPECT_EQ(report["apiVersion"], "wgpolicyk8s.io/v1alpha2");
  EXPECT_EQ(report["kind"], "PolicyReport");
  EXPECT_EQ(report["metadata"]["name"], "ncclguard");
  EXPECT_EQ(report["metadata"]["namespace"], "ml");
  bool found = false;
  for (const core::Json& result : report["results"]) {
    EXPECT_EQ(result["source"], "ncclguard");
    EXPECT_EQ(result["policy"], "ncclguard");
    EXPECT_EQ(result["resources"][0]["kind"], "Pod");
    EXPECT_EQ(result["resources"][0]["uid"], "u-1");
    if (result["rule"] == "efa-resources-missing") {
      found = true;
      EXPECT_EQ(result["result"], "fail");
      EXPECT_EQ(result["properties"]["action"], "fix");
      const std::string guide = result["properties"]["guide"];
      EXPECT_NE(guide.find("#"), std::string::npos) << guide;
    }
  }
  EXPECT_TRUE(found) << report.dump(2);
  EXPECT_EQ(report["summary"]["fail"].get<int>() + report["summary"]["warn"].get<int>(),
            static_cast<int>(report["results"].size()));
}

TEST(PolicyReport, APassingObjectHasOnePassResultAndAnEmptyNamespaceAnEmptyReport) {
  const auto audit = core::AuditObject(CompliantPod(), core::Policy::Defaults());
  const auto reports = core::PolicyReportsFor("ml", {*audit});
  ASSERT_EQ(reports[0]["results"].size(), 1u);
  EXPECT_EQ(reports[0]["results"][0]["result"], "pass");
  EXPECT_EQ(reports[0]["summary"]["pass"], 1);
  const auto empty = core::PolicyReportsFor("ml", {});
  ASSERT_EQ(empty.size(), 1u);
  EXPECT_TRUE(empty[0]["results"].empty());
}

// 5,000 broken pods in one namespace: every report within the budget, named in order, no
// object's results split, nothing lost.
TEST(PolicyReport, ANamespaceOfFiveThousandWorkloadsIsSplitWithinTheBudget) {
  const auto one = core::AuditObject(BrokenPod(), core::Policy::Defaults());
  std::vector<core::ObjectAudit> audits;
  for (int i = 0; i < 5000; ++i) {
    core::ObjectAudit audit = *one;
    audit.object.name = "pod-" + std::to_string(i);
    audit.object.uid = "uid-" + std::to_string(i);
    audits.push_back(std::move(audit));
  }
  const auto reports = core::PolicyReportsFor("ml", audits);
  ASSERT_GT(reports.size(), 1u);
  std::size_t results = 0;
  std::set<std::string> names;
  for (std::size_t i = 0; i < reports.size(); ++i) {
    EXPECT_LE(reports[i].dump().size(), core::kPolicyReportBudget);
    EXPECT_EQ(reports[i]["metadata"]["name"], core::PolicyReportName(i));
    results += reports[i]["results"].size();
    std::set<std::string> here;
    for (const auto& result : reports[i]["results"]) {
      here.insert(result["resources"][0]["name"].get<std::string>());
    }
    for (const auto& name : here) EXPECT_TRUE(names.insert(name).second) << name << " split";
  }
  EXPECT_EQ(results, 5000 * one->findings.size());
  EXPECT_EQ(core::PolicyReportName(1), "ncclguard-2");
}

TEST(PolicyReport, TheSameAuditsBuildTheSameReportsWhateverTheirOrder) {
  const auto broken = core::AuditObject(BrokenPod(), core::Policy::Defaults());
  auto other = core::AuditObject(CompliantPod(), core::Policy::Defaults());
  other->object.name = "a-first";
  EXPECT_EQ(core::PolicyReportsFor("ml", {*broken, *other}),
            core::PolicyReportsFor("ml", {*other, *broken}));
}

TEST(Mode, TheNamespaceLabelOverridesThePolicyAndAnUnknownValueDoesNot) {
  core::Policy policy = core::Policy::Defaults();
  EXPECT_EQ(policy.mode, core::Mode::Enforce);
  const core::Json audit_label{{"ncclguard.io/mode", "audit"}};
  const core::Json enforce_label{{"ncclguard.io/mode", "enforce"}};
  const core::Json typo{{"ncclguard.io/mode", "Audit"}};
  EXPECT_EQ(core::ModeIn(policy, &audit_label), core::Mode::Audit);
  EXPECT_EQ(core::ModeIn(policy, &typo), core::Mode::Enforce);
  EXPECT_EQ(core::ModeIn(policy, nullptr), core::Mode::Enforce);
  policy = core::ParsePolicy("spec: {mode: audit}");
  EXPECT_EQ(core::ModeIn(policy, nullptr), core::Mode::Audit);
  EXPECT_EQ(core::ModeIn(policy, &enforce_label), core::Mode::Enforce);
  EXPECT_THROW(core::ParsePolicy("spec: {mode: dryrun}"), core::PolicyError);
}

TEST(Mode, TheAuditSkipsSystemNamespacesAndKeepsToThePolicysList) {
  core::Policy policy = core::ParsePolicy("spec: {audit: {excludedNamespaces: [scratch]}}");
  EXPECT_TRUE(policy.audit.Audits("ml", "ncclguard-system"));
  EXPECT_FALSE(policy.audit.Audits("kube-system"));
  EXPECT_FALSE(policy.audit.Audits("ncclguard-system", "ncclguard-system"));
  EXPECT_FALSE(policy.audit.Audits("scratch"));
  policy = core::ParsePolicy("spec: {audit: {namespaces: [ml], intervalSeconds: 300}}");
  EXPECT_TRUE(policy.audit.Audits("ml"));
  EXPECT_FALSE(policy.audit.Audits("other"));
  EXPECT_EQ(policy.audit.interval_seconds, 300);
  EXPECT_THROW(core::ParsePolicy("spec: {audit: {intervalSeconds: 5}}"), core::PolicyError);
  EXPECT_THROW(core::ParsePolicy("spec: {audit: {namespaces: ml}}"), core::PolicyError);
}

}  // namespace
}  // namespace ncclguard::test
