// The background audit (manager/audit_controller.h) against the real kube-apiserver, with the
// policy working group's own PolicyReport CRD (Kyverno's module publishes it): workloads created
// before the controller starts are in their namespace's report with the right rules and results;
// fixing a pod and deleting a job take their failures out; a system namespace gets no report;
// nothing unchanged is written again, after a restart either; without the CRD the controller runs,
// says so, and writes once it is installed. Its own control plane: the first test installs the CRD.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "controlplane_env.h"
#include "kube/config.h"
#include "manager/manager.h"
#include "manifests.h"
#include "metrics/registry.h"
#include "process.h"
#include "test_kube_client.h"
#include "tests/metrics_sample.h"

namespace ncclguard::testenv {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class RunningController {
 public:
  RunningController(const ControlPlaneInfo& info, manager::ManagerOptions options)
      : manager_(std::make_unique<manager::Manager>(kube::LoadKubeConfigFile(info.kubeconfig),
                                                    std::move(options))) {
    thread_ = std::thread([this] { manager_->Run(stop_); });
  }
  ~RunningController() {
    stop_.Stop();
    if (thread_.joinable()) thread_.join();
  }
  const manager::Manager& manager() const { return *manager_; }

 private:
  std::unique_ptr<manager::Manager> manager_;
  kube::StopToken stop_;
  std::thread thread_;
};

std::optional<double> Metric(const std::string& series) {
  return ncclguard::testing::MetricSample(metrics::Render(), series);
}

double Writes(const std::string& operation) {
  return Metric("ncclguard_audit_report_writes_total{operation=\"" + operation + "\"}").value_or(0);
}

// The results of a report, as "<kind>/<name> <rule or pass> <result>".
std::set<std::string> Results(const json& report) {
  std::set<std::string> results;
  if (!report.is_object()) return results;
  for (const json& result : report.value("results", json::array())) {
    const json& resource = result["resources"][0];
    results.insert(resource.value("kind", "") + "/" + resource.value("name", "") + " " +
                   result.value("rule", "pass") + " " + result.value("result", ""));
  }
  return results;
}

bool HasResultFor(const std::set<std::string>& results, const std::string& object,
                  const std::string& result) {
  for (const std::string& entry : results) {
    if (entry.starts_with(object + " ") && entry.ends_with(" " + result)) return true;
  }
  return false;
}

class AuditTest : public ::testing::Test {
 protected:
  void SetUp() override {
    info_ = ControlPlaneEnvironment::Info();
    client_ = std::make_unique<TestKubeClient>(info_);
    ApplyCrds(*client_, JobCrd("PyTorchJob"));
    ApplyCrds(*client_, SourceDir() + "/crds/nodevalidation.yaml");
    ApplyCrds(*client_, SourceDir() + "/crds/ncclpolicy.yaml");
    namespace_ = CreateTestNamespace(*client_, "audit");
    own_namespace_ = CreateTestNamespace(*client_, "ncclguard");
  }
  void TearDown() override {
    controller_.reset();
    for (const std::string& ns : {namespace_, own_namespace_}) {
      if (!ns.empty()) client_->Delete("/api/v1/namespaces/" + ns);
    }
    for (const std::string& path : cleanup_) client_->Delete(path);
  }

  void StartController() {
    manager::ManagerOptions options;
    options.leader_elect = false;
    options.cache_sync_timeout = 20s;
    options.lease_namespace = own_namespace_;
    options.enable = {"policy-reports"};
    controller_ = std::make_unique<RunningController>(info_, std::move(options));
  }

  // A pod of 8 GPUs on p5.48xlarge; `compliant`: as the webhook in enforce mode leaves it (EFA
  // devices, IPC_LOCK, NCCL and libfabric settings, /dev/shm), else with none of that.
  static json GpuPod(const std::string& name, bool compliant) {
    json container{{"name", "pytorch"},
                   {"image", "registry.invalid/train@sha256:" + std::string(64, 'a')},
                   {"resources", {{"limits", {{"nvidia.com/gpu", 8}}}}}};
    json pod{{"apiVersion", "v1"},
             {"kind", "Pod"},
             {"metadata", {{"name", name}}},
             {"spec",
              {{"nodeSelector", {{"node.kubernetes.io/instance-type", "p5.48xlarge"}}},
               {"restartPolicy", "Never"}}}};
    if (compliant) {
      container["env"] =
          json::array({{{"name", "FI_PROVIDER"}, {"value", "efa"}},
                       {{"name", "FI_EFA_USE_DEVICE_RDMA"}, {"value", "1"}},
                       {{"name", "NCCL_SOCKET_IFNAME"}, {"value", "^lo,docker,efa,veth"}},
                       {{"name", "TORCH_NCCL_ASYNC_ERROR_HANDLING"}, {"value", "1"}},
                       {{"name", "NCCL_DEBUG"}, {"value", "INFO"}},
                       {{"name", "NCCL_DEBUG_SUBSYS"}, {"value", "INIT,NET"}}});
      const json resources{
          {"nvidia.com/gpu", 8}, {"vpc.amazonaws.com/efa", 32}, {"memory", "1000Gi"}};
      container["resources"] = {{"requests", resources}, {"limits", resources}};
      container["securityContext"] = {{"capabilities", {{"add", {"IPC_LOCK"}}}}};
      container["volumeMounts"] = json::array({{{"name", "dshm"}, {"mountPath", "/dev/shm"}}});
      pod["spec"]["volumes"] =
          json::array({{{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}}}}});
    }
    pod["spec"]["containers"] = json::array({container});
    return pod;
  }

  void Create(const std::string& path, const json& object) {
    const KubeResponse created = client_->Post(path, object);
    ASSERT_EQ(created.status, 201) << created.body;
  }

  std::string Pods(const std::string& ns) const { return "/api/v1/namespaces/" + ns + "/pods"; }
  std::string Reports(const std::string& ns) const {
    return "/apis/wgpolicyk8s.io/v1alpha2/namespaces/" + ns + "/policyreports";
  }
  json Report(const std::string& ns, const std::string& name = "ncclguard") {
    const KubeResponse got = client_->Get(Reports(ns) + "/" + name);
    return got.status == 200 ? got.Json() : json(nullptr);
  }

  // Waits until the applies counted stay the same for `quiet`; returns their count.
  double SettledApplies(std::chrono::milliseconds quiet = 3s) {
    double last = Writes("apply");
    auto since = std::chrono::steady_clock::now();
    Eventually(
        [&] {
          const double now = Writes("apply");
          if (now != last) {
            last = now;
            since = std::chrono::steady_clock::now();
          }
          return std::chrono::steady_clock::now() - since >= quiet;
        },
        60s, 200ms);
    return last;
  }

  ControlPlaneInfo info_;
  std::unique_ptr<TestKubeClient> client_;
  std::string namespace_;
  std::string own_namespace_;
  std::vector<std::string> cleanup_;
  std::unique_ptr<RunningController> controller_;
};

// First in this binary: the CRD is not installed yet.
TEST_F(AuditTest, WithoutTheCrdTheControllerRunsSaysSoAndWritesOnceItIsInstalled) {
  if (client_->Get("/apis/wgpolicyk8s.io/v1alpha2").status == 200) {
    GTEST_SKIP() << "the PolicyReport CRD is installed already (run this test first)";
  }
  Create(Pods(namespace_), GpuPod("broken", false));
  StartController();
  ASSERT_TRUE(Eventually(
      [&] { return Metric("ncclguard_audit_reports_served") == std::optional<double>(0); }, 30s))
      << metrics::Render();
  ASSERT_TRUE(Eventually([&] { return controller_->manager().Ready(); }, 30s));
  EXPECT_EQ(Writes("apply"), 0);

  ApplyCrds(*client_, PolicyReportCrd());
  ASSERT_TRUE(Eventually([&] { return Report(namespace_).is_object(); }, 30s));
  EXPECT_TRUE(HasResultFor(Results(Report(namespace_)), "Pod/broken", "fail"))
      << Report(namespace_).dump(2);
  EXPECT_EQ(Metric("ncclguard_audit_reports_served"), 1);
}

TEST_F(AuditTest, ReportsFollowTheWorkloadsAndNothingUnchangedIsWrittenAgain) {
  ApplyCrds(*client_, PolicyReportCrd());
  // Before the controller starts: a pod missing every fix, a compliant one, a pod without GPUs,
  // a PyTorchJob that cannot be fixed, and a GPU pod in kube-system.
  Create(Pods(namespace_), GpuPod("broken", false));
  Create(Pods(namespace_), GpuPod("fine", true));
  Create(Pods(namespace_), {{"apiVersion", "v1"},
                            {"kind", "Pod"},
                            {"metadata", {{"name", "web"}}},
                            {"spec", {{"containers", {{{"name", "web"}, {"image", "nginx"}}}}}}});
  json job = LoadYamlDocuments(SourceDir() + "/examples/pytorchjob-denied.yaml").at(0);
  job["metadata"] = {{"name", "llama"}};
  const std::string jobs = "/apis/kubeflow.org/v1/namespaces/" + namespace_ + "/pytorchjobs";
  Create(jobs, job);
  const std::string system_pod = "audit-" + namespace_;
  Create(Pods("kube-system"), GpuPod(system_pod, false));
  cleanup_.push_back(Pods("kube-system") + "/" + system_pod);

  const double applies_before = Writes("apply");
  StartController();
  ASSERT_TRUE(Eventually(
      [&] {
        const std::set<std::string> results = Results(Report(namespace_));
        return HasResultFor(results, "Pod/broken", "fail") &&
               HasResultFor(results, "Pod/fine", "pass") &&
               HasResultFor(results, "PyTorchJob/llama", "fail");
      },
      60s))
      << Report(namespace_).dump(2);
  json report = Report(namespace_);
  const std::set<std::string> results = Results(report);
  EXPECT_TRUE(results.contains("Pod/broken efa-resources-missing fail")) << report.dump(2);
  EXPECT_TRUE(results.contains("Pod/fine pass pass")) << report.dump(2);
  EXPECT_FALSE(HasResultFor(results, "Pod/web", "pass") ||
               HasResultFor(results, "Pod/web", "fail") || HasResultFor(results, "Pod/web", "warn"))
      << report.dump(2);
  EXPECT_EQ(report["metadata"]["labels"]["app.kubernetes.io/managed-by"], "ncclguard");
  int fails = 0;
  for (const json& result : report["results"]) fails += result["result"] == "fail" ? 1 : 0;
  EXPECT_EQ(report["summary"]["fail"], fails);
  // `kubectl get policyreport` shows the counts (the CRD's printer columns read the summary).
  const ProcessResult table = RunProcess(
      {info_.bin_dir + "/kubectl", "--kubeconfig", info_.kubeconfig, "get", "policyreport", "-n",
       namespace_, "--no-headers", "-o", "custom-columns=NAME:.metadata.name,FAIL:.summary.fail"});
  EXPECT_EQ(table.stdout_text, "ncclguard   " + std::to_string(fails) + "\n") << table.stderr_text;
  const ProcessResult wide = RunProcess(
      {info_.bin_dir + "/kubectl", "--kubeconfig", info_.kubeconfig, "get", "polr", "-A"});
  EXPECT_NE(wide.stdout_text.find("PASS"), std::string::npos) << wide.stdout_text;
  EXPECT_NE(wide.stdout_text.find(namespace_), std::string::npos) << wide.stdout_text;
  // No report in a system namespace, and one write per report, not per object.
  EXPECT_TRUE(Report("kube-system").is_null());
  double applies = SettledApplies();
  EXPECT_LE(applies - applies_before, 3) << "one report written, a few times at most";

  // Fixed: the pod is replaced (pods are immutable) with a compliant one.
  ASSERT_EQ(client_->Delete(Pods(namespace_) + "/broken").status, 200);
  ASSERT_TRUE(
      Eventually([&] { return client_->Get(Pods(namespace_) + "/broken").status == 404; }, 30s));
  Create(Pods(namespace_), GpuPod("broken", true));
  ASSERT_TRUE(Eventually(
      [&] {
        const std::set<std::string> now = Results(Report(namespace_));
        return now.contains("Pod/broken pass pass") && !HasResultFor(now, "Pod/broken", "fail");
      },
      30s))
      << Report(namespace_).dump(2);
  // Deleted: its results go.
  ASSERT_EQ(client_->Delete(jobs + "/llama").status, 200);
  ASSERT_TRUE(Eventually(
      [&] {
        const std::set<std::string> now = Results(Report(namespace_));
        return !HasResultFor(now, "PyTorchJob/llama", "fail") &&
               !HasResultFor(now, "PyTorchJob/llama", "warn");
      },
      30s))
      << Report(namespace_).dump(2);
  EXPECT_EQ(Report(namespace_)["summary"]["fail"], 0) << Report(namespace_).dump(2);

  // Nothing changes: nothing is written, nor after a restart (the reports are read back).
  applies = SettledApplies();
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(Writes("apply"), applies);
  controller_.reset();
  StartController();
  // Audited again (the gauges come back), and nothing written.
  ASSERT_TRUE(Eventually(
      [&] { return Metric("ncclguard_audit_results{result=\"pass\"}").value_or(0) >= 2; }, 30s))
      << metrics::Render();
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(Writes("apply"), applies);
  EXPECT_EQ(Writes("delete"), 0);
}

}  // namespace
}  // namespace ncclguard::testenv
