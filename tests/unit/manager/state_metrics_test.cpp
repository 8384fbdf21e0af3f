// The state gauges as the caches hold the objects at a scrape: held jobs by reason (gone once
// released), a node check's series moving when its status changes and going with its
// NodeValidation, nodes by instance type and state, Kueue check states; junk never reported.
#include "manager/state_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <memory>
#include <string>

#include "metrics/registry.h"

namespace ncclguard::test {
namespace {

using core::Json;
using core::WorkloadKind;

kube::CachedObject Cached(Json object) { return std::make_shared<const Json>(std::move(object)); }

std::map<WorkloadKind, manager::EachObject> EachJob(
    const std::map<WorkloadKind, std::vector<kube::CachedObject>>& jobs) {
  std::map<WorkloadKind, manager::EachObject> each;
  for (const auto& [kind, objects] : jobs) each.emplace(kind, manager::EachOf(objects));
  return each;
}

std::string Text(const prometheus::MetricFamily& family) {
  return prometheus::TextSerializer().Serialize({family});
}

std::string NodeChecks(const std::vector<kube::CachedObject>& validations) {
  std::string text;
  manager::WriteNodeCheckStatus(manager::EachOf(validations), text);
  return text;
}

bool HasLine(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

Json GatedJob(const std::string& ns, const std::string& name, const std::string& gate,
              const std::string& preflight_reason = "") {
  Json job{{"metadata",
            {{"namespace", ns}, {"name", name}, {"annotations", {{"ncclguard.io/gate", gate}}}}}};
  if (!preflight_reason.empty()) {
    job["status"]["conditions"] = Json::array(
        {{{"type", "NcclPreflight"}, {"status", "False"}, {"reason", preflight_reason}}});
  }
  return job;
}

Json Validation(const std::string& node, const std::string& summary, Json checks) {
  return {{"metadata", {{"name", node}}},
          {"status", {{"summary", summary}, {"checks", std::move(checks)}}}};
}

Json Check(const std::string& id, const std::string& status) {
  return {{"id", id}, {"status", status}};
}

Json Node(const std::string& name, const std::string& instance_type, bool cordoned = false) {
  Json node{{"metadata",
             {{"name", name}, {"labels", {{"node.kubernetes.io/instance-type", instance_type}}}}}};
  if (cordoned) node["spec"]["unschedulable"] = true;
  return node;
}

TEST(StateMetrics, HeldJobsAreCountedByNamespaceKindAndReasonUntilReleased) {
  std::map<WorkloadKind, std::vector<kube::CachedObject>> jobs;
  jobs[WorkloadKind::PyTorchJob] = {
      Cached(GatedJob("team-a", "a", "pending", "InsufficientValidatedNodes")),
      Cached(GatedJob("team-a", "b", "pending", "InsufficientValidatedNodes")),
      Cached(GatedJob("team-a", "c", "pending")),  // not judged yet
      Cached(GatedJob("team-a", "d", "admitted", "InsufficientValidatedNodes")),
      Cached(GatedJob("team-b", "e", "pending", "bad reason\"}")),
      Cached(Json("not a job")),
      nullptr};
  jobs[WorkloadKind::BatchJob] = {
      Cached(GatedJob("team-b", "f", "pending", "InsufficientValidatedNodes"))};
  const std::string text = Text(manager::HeldJobsFamily(EachJob(jobs)));
  const std::string held = "ncclguard_gate_held_jobs";
  EXPECT_TRUE(HasLine(
      text,
      held + R"({kind="PyTorchJob",namespace="team-a",reason="InsufficientValidatedNodes"} 2)"))
      << text;
  EXPECT_TRUE(HasLine(text, held + R"({kind="PyTorchJob",namespace="team-a",reason="Pending"} 1)"));
  EXPECT_TRUE(HasLine(text, held + R"({kind="PyTorchJob",namespace="team-b",reason="Unknown"} 1)"));
  EXPECT_TRUE(HasLine(
      text, held + R"({kind="Job",namespace="team-b",reason="InsufficientValidatedNodes"} 1)"));
  EXPECT_TRUE(HasLine(text, "# TYPE " + held + " gauge"));

  // Released: the job is annotated admitted, and its series is gone, not 0.
  jobs[WorkloadKind::BatchJob] = {
      Cached(GatedJob("team-b", "f", "admitted", "InsufficientValidatedNodes"))};
  EXPECT_EQ(Text(manager::HeldJobsFamily(EachJob(jobs))).find(R"(kind="Job")"), std::string::npos);
}

Json PlacedJob(const std::string& ns, const std::string& name, const std::string& reason) {
  return {{"metadata", {{"namespace", ns}, {"name", name}}},
          {"status",
           {{"conditions", Json::array({{{"type", "NcclPlacement"},
                                         {"status", reason == "OneBlock" ? "True" : "False"},
                                         {"reason", reason}}})}}}};
}

TEST(StateMetrics, JobsAreCountedByTheReasonOfTheirPlacement) {
  std::map<WorkloadKind, std::vector<kube::CachedObject>> jobs;
  jobs[WorkloadKind::PyTorchJob] = {
      Cached(PlacedJob("ml", "a", "OneBlock")), Cached(PlacedJob("ml", "b", "Spread")),
      Cached(PlacedJob("ml", "c", "Spread")), Cached(GatedJob("ml", "d", "admitted"))};  // none yet
  const std::string text = Text(manager::PlacementFamily(EachJob(jobs)));
  const std::string placement = "ncclguard_job_placement";
  EXPECT_TRUE(HasLine(text, placement + R"({kind="PyTorchJob",namespace="ml",reason="Spread"} 2)"))
      << text;
  EXPECT_TRUE(
      HasLine(text, placement + R"({kind="PyTorchJob",namespace="ml",reason="OneBlock"} 1)"));
  EXPECT_EQ(text.find(R"(reason="NoTopologyLabels")"), std::string::npos);  // no series for 0
}

TEST(StateMetrics, ANodeCheckTurningFailMovesItsSeriesAndADeletedValidationTakesThemAway) {
  const std::string pass =
      R"(ncclguard_node_check_status{check="efa-device-count",node="n1",status="Pass"} 1)";
  const std::string fail =
      R"(ncclguard_node_check_status{check="efa-device-count",node="n1",status="Fail"} 1)";
  std::vector<kube::CachedObject> validations = {Cached(
      Validation("n1", "Pass", {Check("efa-device-count", "Pass"), Check("gpu-count", "Skip")}))};
  std::string text = NodeChecks(validations);
  EXPECT_TRUE(HasLine(text, pass)) << text;
  EXPECT_TRUE(
      HasLine(text, R"(ncclguard_node_check_status{check="gpu-count",node="n1",status="Skip"} 1)"));

  validations = {Cached(
      Validation("n1", "Fail", {Check("efa-device-count", "Fail"), Check("gpu-count", "Skip")}))};
  text = NodeChecks(validations);
  EXPECT_TRUE(HasLine(text, fail)) << text;
  EXPECT_FALSE(HasLine(text, pass)) << text;

  validations.clear();
  EXPECT_EQ(NodeChecks(validations).find("node=\"n1\""), std::string::npos);
}

TEST(StateMetrics, NodeChecksThatCannotBeReadAreLeftOut) {
  Json checks = Json::array({Check("efa-device-count", "Pass"),
                             Check("efa-device-count", "Fail"),  // a second entry of one id
                             Check("Not An Id", "Pass"), Check("memlock", "Maybe"), Json(7),
                             Json{{"id", 3}, {"status", "Pass"}}});
  for (int i = 0; i < 100; ++i) checks.push_back(Check("c" + std::to_string(i), "Pass"));
  const std::vector<kube::CachedObject> validations = {
      Cached(Validation("n1", "Pass", checks)), Cached(Json{{"status", "junk"}}),
      Cached(Json{{"metadata", {{"name", "n2"}}}, {"status", {{"checks", "junk"}}}})};
  const std::string text = NodeChecks(validations);
  std::size_t series = 0;
  for (std::size_t at = text.find("\nncclguard_node_check_status{"); at != std::string::npos;
       at = text.find("\nncclguard_node_check_status{", at + 1)) {
    ++series;
  }
  EXPECT_EQ(series, 64u) << text;  // the bound per node
  EXPECT_EQ(text.find(R"(status="Fail")"), std::string::npos);
  EXPECT_EQ(text.find("Not An Id"), std::string::npos);
  EXPECT_EQ(text.find("Maybe"), std::string::npos);
}

TEST(StateMetrics, NodesOfCatalogTypesAreCountedByValidationState) {
  const std::vector<kube::CachedObject> nodes = {
      Cached(Node("a", "p5.48xlarge")),
      Cached(Node("b", "ml.p5.48xlarge")),
      Cached(Node("c", "p5.48xlarge")),
      Cached(Node("d", "p5.48xlarge", true)),
      Cached(Node("e", "p5.48xlarge")),
      Cached(Node("f", "m5.xlarge")),  // not in the catalog
      Cached(Json{{"metadata", {{"name", "g"}}}})};
  const std::vector<kube::CachedObject> validations = {
      Cached(Validation("a", "Pass", Json::array())),
      Cached(Validation("b", "Warn", Json::array())),
      Cached(Validation("c", "Fail", Json::array())),
      Cached(Validation("d", "Pass", Json::array())),
      Cached(Validation("f", "Pass", Json::array()))};
  const std::string text = Text(manager::NodesFamily(
      manager::EachOf(nodes), manager::FindByName(validations), core::Policy::Defaults()));
  EXPECT_TRUE(HasLine(text, R"(ncclguard_nodes{instance_type="p5.48xlarge",state="validated"} 2)"))
      << text;
  EXPECT_TRUE(HasLine(text, R"(ncclguard_nodes{instance_type="p5.48xlarge",state="failed"} 1)"));
  EXPECT_TRUE(HasLine(text, R"(ncclguard_nodes{instance_type="p5.48xlarge",state="cordoned"} 1)"));
  EXPECT_TRUE(
      HasLine(text, R"(ncclguard_nodes{instance_type="p5.48xlarge",state="unvalidated"} 1)"));
  EXPECT_EQ(text.find("m5.xlarge"), std::string::npos);
  EXPECT_EQ(text.find(R"(state="unhealthy")"), std::string::npos);  // no series for 0
}

TEST(StateMetrics, KueueChecksAreCountedByStateOnlyForOurChecks) {
  const Json workload{
      {"status",
       {{"admissionChecks", Json::array({{{"name", "ncclguard-preflight"}, {"state", "Pending"}},
                                         {{"name", "someone-else"}, {"state", "Ready"}}})}}}};
  const Json ready{
      {"status",
       {{"admissionChecks", Json::array({{{"name", "ncclguard-preflight"}, {"state", "Ready"}},
                                         {{"name", "ncclguard-preflight"}, {"state", "Odd"}}})}}}};
  const std::string text = Text(manager::KueueChecksFamily(
      manager::EachOf({Cached(workload), Cached(workload), Cached(ready), Cached(Json::array())}),
      {"ncclguard-preflight"}));
  EXPECT_TRUE(HasLine(text, R"(ncclguard_kueue_admission_checks{state="Pending"} 2)")) << text;
  EXPECT_TRUE(HasLine(text, R"(ncclguard_kueue_admission_checks{state="Ready"} 1)"));
  EXPECT_TRUE(HasLine(text, R"(ncclguard_kueue_admission_checks{state="Retry"} 0)"));
  EXPECT_TRUE(HasLine(text, R"(ncclguard_kueue_admission_checks{state="Rejected"} 0)"));
  EXPECT_EQ(text.find("Odd"), std::string::npos);
}

TEST(StateMetrics, TheCollectorReportsWhileActiveAndOnlyWhileRegistered) {
  bool leading = false;
  manager::StateCollector collector([&leading] { return leading; });
  collector.AddText([](std::string& out) {
    manager::WriteNodeCheckStatus(
        manager::EachOf({Cached(Validation("n1", "Pass", {Check("memlock", "Warn")}))}), out);
  });
  prometheus::Registry registry;
  const std::string series =
      R"(ncclguard_node_check_status{check="memlock",node="n1",status="Warn"} 1)";
  {
    const metrics::CollectorRegistration registration(registry, collector);
    EXPECT_FALSE(HasLine(metrics::Render(registry), series)) << "a standby reports no state";
    leading = true;
    EXPECT_TRUE(HasLine(metrics::Render(registry), series));
    EXPECT_FALSE(HasLine(metrics::Render(metrics::Global()), series)) << "another registry's";
  }
  EXPECT_FALSE(HasLine(metrics::Render(registry), series));
}

}  // namespace
}  // namespace ncclguard::test
