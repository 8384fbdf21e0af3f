// `ncclguard audit` against the real API server through a kubeconfig: broken and compliant GPU
// pods and an MPIJob in two namespaces, -n and -A, text and -o json (the PolicyReports
// core::PolicyReportsFor builds of the same objects), exit codes, a kind whose CRD is not
// installed (PyTorchJob), and the cluster's NcclPolicy default.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "controlplane_env.h"
#include "core/audit.h"
#include "core/json.h"
#include "core/policy.h"
#include "core/policy_report.h"
#include "manifests.h"
#include "test_kube_client.h"
#include "tests/unit/test_support.h"

namespace ncclguard::testenv {
namespace {

using core::Json;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

Json GpuPod(const std::string& name, bool broken) {
  Json pod = test::CompliantPod();
  pod["metadata"] = {{"name", name}};
  if (broken) {
    for (auto& container : pod["spec"]["containers"]) {
      container["resources"]["limits"].erase("vpc.amazonaws.com/efa");
      container["resources"]["requests"].erase("vpc.amazonaws.com/efa");
    }
  }
  return pod;
}

Json CpuPod() {
  return Json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "web"}}},
              {"spec", {{"containers", Json::array({{{"name", "web"}, {"image", "nginx"}}})}}}};
}

class AuditCommandTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    info_ = ControlPlaneEnvironment::Info();
    admin_ = new TestKubeClient(info_);
    ApplyCrds(*admin_, TestCrdDir() + "/mpijob-crd.yaml");
    ApplyCrds(*admin_, SourceDir() + "/crds/ncclpolicy.yaml");
    const std::string suffix = std::to_string(getpid());
    broken_ns_ = "audit-mixed-" + suffix;
    clean_ns_ = "audit-clean-" + suffix;
    for (const std::string& ns : {broken_ns_, clean_ns_}) {
      const KubeResponse created = admin_->Post(
          "/api/v1/namespaces",
          Json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
      ASSERT_EQ(created.status, 201) << created.body;
    }
    Create(broken_ns_, "pods", GpuPod("good", false));
    Create(broken_ns_, "pods", GpuPod("bad", true));
    Create(broken_ns_, "pods", CpuPod());
    Json mpijob = test::Yaml(test::ReadFile(test::SourcePath("examples/mpijob-p4d.yaml")));
    mpijob["metadata"].erase("namespace");
    Create(broken_ns_, "mpijobs", mpijob);
    Create(clean_ns_, "pods", GpuPod("good", false));
    Create(clean_ns_, "pods", CpuPod());
  }
  static void TearDownTestSuite() {
    delete admin_;
    admin_ = nullptr;
  }

  static std::string Collection(const std::string& ns, const std::string& resource) {
    return resource == "pods" ? "/api/v1/namespaces/" + ns + "/pods"
                              : "/apis/kubeflow.org/v2beta1/namespaces/" + ns + "/" + resource;
  }
  static void Create(const std::string& ns, const std::string& resource, const Json& object) {
    const KubeResponse created = admin_->Post(Collection(ns, resource), object);
    ASSERT_EQ(created.status, 201) << created.body;
  }

  // What core::PolicyReportsFor builds of the objects the server holds in `ns`; none when nothing
  // there is audited (the controller writes none).
  static std::vector<Json> ExpectedReports(const std::string& ns, const core::Policy& policy) {
    std::vector<core::ObjectAudit> audits;
    for (const std::string resource : {"mpijobs", "pods"}) {
      const Json list = Json::parse(admin_->Get(Collection(ns, resource)).body);
      for (const Json& object : list["items"]) {
        Json item = object;
        // A list's items carry no apiVersion and kind; the objects do.
        item["apiVersion"] = resource == "pods" ? "v1" : "kubeflow.org/v2beta1";
        item["kind"] = resource == "pods" ? "Pod" : "MPIJob";
        if (auto audit = core::AuditObject(item, policy)) audits.push_back(std::move(*audit));
      }
    }
    if (audits.empty()) return {};
    return core::PolicyReportsFor(ns, std::move(audits));
  }

  test::CommandResult Audit(std::vector<std::string> args) const {
    args.insert(args.begin(), {"audit", "--kubeconfig", info_.kubeconfig});
    return test::RunCli(args);
  }

  // (object name, rule) -> result, from -o json's reports.
  static std::map<std::pair<std::string, std::string>, std::string> Results(const Json& list) {
    std::map<std::pair<std::string, std::string>, std::string> results;
    for (const Json& report : list["items"]) {
      for (const Json& result : report["results"]) {
        const Json& resource = result["resources"][0];
        results[{resource["namespace"].get<std::string>() + "/" +
                     resource["kind"].get<std::string>() + "/" +
                     resource["name"].get<std::string>(),
                 result.value("rule", "")}] = result["result"];
      }
    }
    return results;
  }

  static ControlPlaneInfo info_;
  static TestKubeClient* admin_;
  static std::string broken_ns_;
  static std::string clean_ns_;
};

ControlPlaneInfo AuditCommandTest::info_;
TestKubeClient* AuditCommandTest::admin_ = nullptr;
std::string AuditCommandTest::broken_ns_;
std::string AuditCommandTest::clean_ns_;

TEST_F(AuditCommandTest, TextNamesEachObjectsResultsAndExitsOneOnAFail) {
  const auto r = Audit({"-n", broken_ns_});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::string ns = broken_ns_;
  EXPECT_TRUE(Contains(r.out, "Pod " + ns + "/good: pass\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "Pod " + ns + "/bad: fail\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "  fail efa-resources-missing (fix) at /spec/containers/0")) << r.out;
  EXPECT_TRUE(Contains(r.out, "MPIJob " + ns + "/nccl-tests: warn\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "guide: https://")) << r.out;
  EXPECT_FALSE(Contains(r.out, "/web")) << "a CPU pod is not audited: " << r.out;
  EXPECT_FALSE(Contains(r.out, clean_ns_)) << r.out;
  EXPECT_TRUE(Contains(r.out, " pass: 3 objects in 1 namespaces\n")) << r.out;
  // PyTorchJob's CRD is not installed: silently skipped in text.
  EXPECT_FALSE(Contains(r.out + r.err, "PyTorchJob")) << r.out << r.err;
  EXPECT_TRUE(Contains(r.err, "policy: built-in defaults")) << r.err;
}

TEST_F(AuditCommandTest, ANamespaceWhereEverythingPassesExitsZero) {
  const auto r = Audit({"--namespace", clean_ns_});
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_EQ(r.out, "Pod " + clean_ns_ +
                       "/good: pass\n0 fail, 0 warn, 1 pass: 1 objects in 1 namespaces\n");
}

TEST_F(AuditCommandTest, JsonIsThePolicyReportsOfTheSameObjectsPerNamespace) {
  const auto one = Audit({"-n", broken_ns_, "-o", "json"});
  ASSERT_EQ(one.exit_code, 1) << one.err;
  const Json list = Json::parse(one.out);
  EXPECT_EQ(list["kind"], "List");
  const core::Policy policy = core::Policy::Defaults();
  EXPECT_EQ(list["items"], Json(ExpectedReports(broken_ns_, policy)));
  const auto results = Results(list);
  const std::string ns = broken_ns_;
  EXPECT_EQ(results.at({ns + "/Pod/good", ""}), "pass");
  EXPECT_EQ(results.at({ns + "/Pod/bad", "efa-resources-missing"}), "fail");
  EXPECT_EQ(results.at({ns + "/MPIJob/nccl-tests", "efa-resources-missing"}), "warn");
  EXPECT_FALSE(results.contains({ns + "/Pod/web", ""}));
  EXPECT_TRUE(Contains(list["ncclguard"]["notServed"].dump(), "PyTorchJob kubeflow.org/v1"))
      << list["ncclguard"].dump();

  // -A: every namespace the policy audits, in name order; kube-system never.
  const auto all = Audit({"-A", "-o", "json"});
  ASSERT_EQ(all.exit_code, 1) << all.err;
  const Json all_list = Json::parse(all.out);
  Json expected = Json::array();
  std::set<std::string> namespaces;
  const Json listed = Json::parse(admin_->Get("/api/v1/namespaces").body);
  for (const Json& ns_object : listed["items"]) {
    namespaces.insert(ns_object["metadata"]["name"].get<std::string>());
  }
  for (const std::string& name : namespaces) {
    if (!policy.audit.Audits(name)) continue;
    for (Json& report : ExpectedReports(name, policy)) expected.push_back(std::move(report));
  }
  EXPECT_EQ(all_list["items"], expected);
  std::set<std::string> reported;
  for (const Json& report : all_list["items"]) reported.insert(report["metadata"]["namespace"]);
  EXPECT_TRUE(reported.contains(broken_ns_));
  EXPECT_TRUE(reported.contains(clean_ns_));
  EXPECT_FALSE(reported.contains("default")) << "nothing audited there";
  EXPECT_FALSE(reported.contains("kube-system"));
}

TEST_F(AuditCommandTest, TheClustersNcclPolicyDefaultIsUsedAndSaidUnlessPolicyIsGiven) {
  // It excludes the mixed namespace and makes the missing EFA devices a warning.
  const KubeResponse created = admin_->Post(
      "/apis/ncclguard.io/v1alpha1/ncclpolicies",
      Json{{"apiVersion", "ncclguard.io/v1alpha1"},
           {"kind", "NcclPolicy"},
           {"metadata", {{"name", "default"}}},
           {"spec", {{"audit", {{"excludedNamespaces", Json::array({broken_ns_})}}}}}});
  ASSERT_EQ(created.status, 201) << created.body;
  const auto all = Audit({"-A"});
  EXPECT_EQ(all.exit_code, 0) << all.err << all.out;
  EXPECT_TRUE(Contains(all.err, "policy: the cluster's NcclPolicy default")) << all.err;
  EXPECT_FALSE(Contains(all.out, broken_ns_)) << all.out;
  EXPECT_TRUE(Contains(all.out, "Pod " + clean_ns_ + "/good: pass")) << all.out;

  // --policy wins over the cluster's.
  test::TempFile policy("apiVersion: ncclguard.io/v1alpha1\nkind: NcclPolicy\nspec: {}\n");
  const auto own = Audit({"-A", "--policy", policy.path()});
  EXPECT_EQ(own.exit_code, 1) << own.err;
  EXPECT_TRUE(Contains(own.out, "Pod " + broken_ns_ + "/bad: fail")) << own.out;
  EXPECT_TRUE(Contains(own.err, "policy: --policy " + policy.path())) << own.err;
  admin_->Delete("/apis/ncclguard.io/v1alpha1/ncclpolicies/default");
}

}  // namespace
}  // namespace ncclguard::testenv
