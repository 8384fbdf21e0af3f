// The background audit's pure parts (manager/audit_controller.h): which report writes a
// namespace needs, the digest that lets an unchanged report go unwritten, what the caches keep of
// a GPU pod (enough for the audit to say what it says of the whole pod), and the changes that
// queue a namespace.
#include <gtest/gtest.h>

#include "core/audit.h"
#include "core/policy_report.h"
#include "manager/audit_controller.h"
#include "manager/cache.h"
#include "manager/projections.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

using core::Json;

Json BrokenPod(const std::string& name) {
  Json pod = CompliantPod();
  pod["metadata"]["name"] = name;
  pod["metadata"]["namespace"] = "team";
  for (auto& container : pod["spec"]["containers"]) {
    container["resources"]["limits"].erase("vpc.amazonaws.com/efa");
    container["resources"]["requests"].erase("vpc.amazonaws.com/efa");
  }
  return pod;
}

std::vector<Json> ReportsOf(const std::vector<Json>& pods) {
  std::vector<core::ObjectAudit> audits;
  for (const Json& pod : pods) audits.push_back(*core::AuditObject(pod, core::Policy::Defaults()));
  return core::PolicyReportsFor("team", audits);
}

// The report as the API server returns it: what it adds, and the fields in another order.
Json AsStored(const Json& report) {
  // Its keys in another order (sorted, as the API server's encoder writes them).
  Json stored = Json::parse(nlohmann::json::parse(report.dump()).dump());
  stored["metadata"]["uid"] = "0c9f";
  stored["metadata"]["resourceVersion"] = "812";
  stored["metadata"]["generation"] = 3;
  stored["metadata"]["creationTimestamp"] = "2026-12-06T02:00:00Z";
  stored["metadata"]["managedFields"] =
      Json::array({{{"manager", "ncclguard.io/audit"}, {"operation", "Apply"}}});
  return stored;
}

TEST(AuditReports, TheStoredReportHasTheDigestOfTheBuiltOne) {
  const std::vector<Json> reports = ReportsOf({BrokenPod("a"), CompliantPod()});
  ASSERT_EQ(reports.size(), 1u);
  const std::string digest = manager::ReportDigest(reports[0]);
  EXPECT_EQ(manager::ReportDigest(AsStored(reports[0])), digest);
  const Json kept = manager::ReportDigestProjection()(AsStored(reports[0]));
  EXPECT_EQ(kept["digest"], digest);
  EXPECT_EQ(kept.size(), 2u) << kept.dump();  // the digest and the name: not the results
  EXPECT_NE(manager::ReportDigest(ReportsOf({BrokenPod("b")})[0]), digest);
}

TEST(AuditReports, ANamespaceWithNothingAuditedAndNoReportGetsNothing) {
  const std::vector<Json> empty = core::PolicyReportsFor("team", {});
  EXPECT_TRUE(manager::PlanReportWrites(empty, {}, {}).apply.empty());
  EXPECT_TRUE(manager::PlanReportWrites({}, {}, {}).remove.empty());
  // With a report there, the empty one clears its results.
  const auto clear = manager::PlanReportWrites(empty, {{"ncclguard", "old"}}, {});
  ASSERT_EQ(clear.apply.size(), 1u);
  EXPECT_TRUE(clear.apply[0]["results"].empty());
}

TEST(AuditReports, OnlyAChangedReportIsWrittenAndReportsNoLongerNeededAreDeleted) {
  const std::vector<Json> reports = ReportsOf({BrokenPod("a")});
  const std::string digest = manager::ReportDigest(reports[0]);
  // New: applied.
  EXPECT_EQ(manager::PlanReportWrites(reports, {}, {}).apply.size(), 1u);
  // What the server holds already (the controller restarted): nothing.
  const auto unchanged = manager::PlanReportWrites(reports, {{"ncclguard", digest}}, {});
  EXPECT_TRUE(unchanged.apply.empty());
  EXPECT_TRUE(unchanged.remove.empty());
  // Applied by this process, the informer not told yet: nothing either.
  EXPECT_TRUE(manager::PlanReportWrites(reports, {{"ncclguard", "before"}}, {{"ncclguard", digest}})
                  .apply.empty());
  // Changed since: applied, and the second report the namespace needed before is deleted.
  const auto changed = manager::PlanReportWrites(
      reports, {{"ncclguard", "before"}, {"ncclguard-2", "x"}}, {{"ncclguard", "before"}});
  ASSERT_EQ(changed.apply.size(), 1u);
  EXPECT_EQ(changed.apply[0]["metadata"]["name"], "ncclguard");
  EXPECT_EQ(changed.remove, std::vector<std::string>{"ncclguard-2"});
  // A namespace no longer audited: its reports go.
  const auto dropped = manager::PlanReportWrites({}, {{"ncclguard", digest}}, {});
  EXPECT_TRUE(dropped.apply.empty());
  EXPECT_EQ(dropped.remove, std::vector<std::string>{"ncclguard"});
}

TEST(AuditReports, TheTallyCountsResultsAsTheReportsDoAndFindingsByRule) {
  std::vector<core::ObjectAudit> audits;
  audits.push_back(*core::AuditObject(BrokenPod("a"), core::Policy::Defaults()));
  audits.push_back(*core::AuditObject(CompliantPod(), core::Policy::Defaults()));
  manager::AuditTally tally;
  tally.Add(audits);
  const Json report = core::PolicyReportsFor("team", audits)[0];
  for (const char* result : {"pass", "warn", "fail"}) {
    EXPECT_EQ(tally.results[result], report["summary"][result].get<double>()) << result;
  }
  EXPECT_EQ(tally.findings["efa-resources-missing"], 1);
  manager::AuditTally twice = tally;
  twice.Add(tally);
  EXPECT_EQ(twice.results["pass"], 2);
}

TEST(AuditReports, TheCachedGpuPodIsAuditedAsTheWholePod) {
  // What the caches keep of a pod when every controller runs (the training-job controller's
  // fields and the audit's, in one object).
  const kube::Projection cached = manager::CachedFields(kube::resources::Pods());
  // A pod as the API server stores it: its defaults, command and probes, the service account's
  // projected volume, kubectl's last-applied annotation, a /dev/shm and an InfiniBand hostPath.
  Json stored = BrokenPod("stored");
  stored["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
      std::string(4000, 'x');
  for (Json& container : stored["spec"]["containers"]) {
    container["command"] = {"torchrun", "--nnodes=2", "train.py"};
    container["terminationMessagePath"] = "/dev/termination-log";
    container["imagePullPolicy"] = "IfNotPresent";
    container["readinessProbe"] = {{"exec", {{"command", {"true"}}}}};
    container["volumeMounts"].push_back(
        {{"name", "kube-api-access"}, {"mountPath", "/var/run/secrets/kubernetes.io"}});
    container["volumeMounts"].push_back({{"name", "ib"}, {"mountPath", "/dev/infiniband"}});
  }
  stored["spec"]["volumes"].push_back(
      {{"name", "kube-api-access"}, {"projected", {{"sources", Json::array({{{"x", 1}}})}}}});
  stored["spec"]["volumes"].push_back(
      {{"name", "ib"}, {"hostPath", {{"path", "/dev/infiniband"}}}});
  stored["spec"]["tolerations"] = Json::array({{{"key", "node.kubernetes.io/not-ready"}}});
  stored["spec"]["affinity"] = Yaml(R"(
nodeAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    nodeSelectorTerms:
      - matchExpressions:
          - {key: node.kubernetes.io/instance-type, operator: In, values: [p4d.24xlarge]}
podAntiAffinity: {x: 1}
)");
  for (Json pod : {CompliantPod(), BrokenPod("b"), stored}) {
    pod["metadata"]["labels"]["training.kubeflow.org/job-name"] = "llama";
    pod["metadata"]["ownerReferences"] = Json::array({{{"apiVersion", "kubeflow.org/v1"},
                                                       {"kind", "PyTorchJob"},
                                                       {"name", "llama"},
                                                       {"uid", "u"},
                                                       {"controller", true}}});
    pod["status"] = {{"phase", "Running"}};
    Json listed = pod;  // list items lack apiVersion and kind
    listed.erase("apiVersion");
    listed.erase("kind");
    const Json kept = cached(listed);
    EXPECT_TRUE(manager::IsAuditedPod(kept));
    const auto whole = core::AuditObject(pod, core::Policy::Defaults());
    const auto projected = core::AuditObject(kept, core::Policy::Defaults());
    ASSERT_TRUE(whole && projected);
    ASSERT_EQ(projected->findings.size(), whole->findings.size());
    for (std::size_t i = 0; i < whole->findings.size(); ++i) {
      EXPECT_EQ(projected->findings[i].finding.rule, whole->findings[i].finding.rule);
      EXPECT_EQ(projected->findings[i].finding.message, whole->findings[i].finding.message);
      EXPECT_EQ(projected->findings[i].finding.path, whole->findings[i].finding.path);
    }
    // Most of a stored pod is never read: a fraction of it is kept.
    if (pod["metadata"]["name"] == "stored") {
      EXPECT_LT(kept.dump().size() * 3, listed.dump().size()) << kept.dump();
    }
    // The training-job controller's fields are still there.
    EXPECT_EQ(kept["metadata"]["ownerReferences"][0]["kind"], "PyTorchJob");
    EXPECT_EQ(kept["status"]["phase"], "Running");
  }
}

TEST(AuditReports, APodWithoutAGpuKeepsItsIdentityOnly) {
  const Json web{{"metadata",
                  {{"name", "web"},
                   {"namespace", "a"},
                   {"uid", "u"},
                   {"resourceVersion", "1"},
                   {"labels", {{"app", "web"}}}}},
                 {"spec", {{"containers", {{{"name", "web"}, {"image", "nginx"}}}}}}};
  const Json kept = manager::AuditPodProjection()(web);
  EXPECT_EQ(
      kept,
      (Json{{"metadata",
             {{"name", "web"}, {"namespace", "a"}, {"uid", "u"}, {"resourceVersion", "1"}}}}));
  EXPECT_FALSE(manager::IsAuditedPod(manager::CachedFields(kube::resources::Pods())(web)));
  for (const Json& junk :
       {Json(nullptr), Json("x"), Json{{"spec", {{"containers", "x"}}}},
        Json{{"spec", {{"containers", {1, {{"resources", 2}}}}}}},
        Json{{"spec",
              {{"containers", {{{"resources", {{"limits", {{"nvidia.com/gpu", "many"}}}}}}}}}}}}) {
    EXPECT_NO_THROW(manager::AuditPodProjection()(junk)) << junk.dump();
  }
}

TEST(AuditReports, StatusChangesDoNotQueueTheNamespace) {
  Json job{{"metadata", {{"name", "j"}, {"labels", {{"a", "b"}}}}},
           {"spec", {{"replicas", 2}}},
           {"status", {{"conditions", Json::array()}}}};
  Json status_only = job;
  status_only["status"]["conditions"].push_back({{"type", "NcclPreflight"}});
  status_only["metadata"]["resourceVersion"] = "9";
  EXPECT_FALSE(manager::AuditedFieldsChanged(&job, &status_only));
  Json spec = job;
  spec["spec"]["replicas"] = 3;
  EXPECT_TRUE(manager::AuditedFieldsChanged(&job, &spec));
  Json labels = job;
  labels["metadata"]["labels"]["c"] = "d";
  EXPECT_TRUE(manager::AuditedFieldsChanged(&job, &labels));
  EXPECT_TRUE(manager::AuditedFieldsChanged(nullptr, &job));
  EXPECT_TRUE(manager::AuditedFieldsChanged(&job, nullptr));
}

}  // namespace
}  // namespace ncclguard::test
