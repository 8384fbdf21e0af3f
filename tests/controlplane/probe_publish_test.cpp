// `ncclguard probe --publish` against the real kube-apiserver: the NodeValidation status, the
// node label and the NcclReady condition an admin reads with kubectl, re-runs on request, and
// publishing that survives the API server going away. The checks read the fixture host trees of
// tests/fixtures/probe with fixed libfabric/GPU answers (no EFA or GPU on the test machine).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "controlplane_env.h"
#include "core/json.h"
#include "kube/client.h"
#include "manifests.h"
#include "probes/publisher.h"
#include "test_kube_client.h"
#include "tests/unit/probes/probe_test_support.h"

namespace ncclguard::testenv {
namespace {

using namespace std::chrono_literals;
using core::Json;

std::string RandomSuffix() {
  static std::atomic<int> counter{0};
  return std::to_string(getpid()) + "-" + std::to_string(++counter);
}

// A report for one fixture tree: p5-32efa passes, p5-30efa fails efa-device-count.
probes::ProbeReport FixtureReport(const std::string& tree, int efa_devices,
                                  const std::string& node) {
  auto sources = std::make_shared<test::FakeFactSources>();
  sources->fabric = test::EfaFabric(efa_devices);
  sources->gpu = test::HealthyGpus();
  return test::RunFixture({tree, "p5.48xlarge", node}, sources);
}

// A clock for the condition's times that moves a minute per reading, so that transition times
// differ between runs without the test waiting for seconds to pass.
std::function<std::chrono::system_clock::time_point()> SteppingClock() {
  auto readings = std::make_shared<std::atomic<int>>(0);
  const auto start = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
  return [readings, start] { return start + std::chrono::minutes(++*readings); };
}

void CreateNode(TestKubeClient& admin, const std::string& name) {
  const KubeResponse created = admin.Post(
      "/api/v1/nodes",
      Json{{"apiVersion", "v1"},
           {"kind", "Node"},
           {"metadata",
            {{"name", name}, {"labels", {{"node.kubernetes.io/instance-type", "p5.48xlarge"}}}}}});
  ASSERT_EQ(created.status, 201) << created.body;
  // The kubelet's own condition, which the probe must leave alone.
  const KubeResponse status = admin.Request(
      "PATCH", "/api/v1/nodes/" + name + "/status",
      Json{{"status",
            {{"conditions", Json::array({{{"type", "Ready"},
                                          {"status", "True"},
                                          {"reason", "KubeletReady"},
                                          {"lastHeartbeatTime", "2026-01-01T00:00:00Z"},
                                          {"lastTransitionTime", "2026-01-01T00:00:00Z"}}})}}}}
          .dump(),
      "application/strategic-merge-patch+json");
  ASSERT_EQ(status.status, 200) << status.body;
}

Json Condition(const Json& node, const std::string& type) {
  const Json conditions = node.value("status", Json::object()).value("conditions", Json::array());
  for (const Json& condition : conditions)
    if (condition.value("type", "") == type) return condition;
  return nullptr;
}

const Json& CheckOf(const Json& validation, const std::string& id) {
  for (const Json& check : validation["status"]["checks"])
    if (check["id"] == id) return check;
  throw std::out_of_range("no check " + id);
}

class ProbePublishTest : public ::testing::Test {
 protected:
  void SetUp() override { Connect(ControlPlaneEnvironment::Info()); }
  void TearDown() override {
    if (admin_ && !node_.empty()) {
      admin_->Delete("/api/v1/nodes/" + node_);
      admin_->Delete("/apis/ncclguard.io/v1alpha1/nodevalidations/" + node_);
    }
  }

  void Connect(const ControlPlaneInfo& info) {
    info_ = info;
    admin_ = std::make_unique<TestKubeClient>(info_);
    ApplyCrds(*admin_, SourceDir() + "/crds/nodevalidation.yaml");
    client_ = std::make_shared<kube::Client>(kube::LoadKubeConfigFile(info_.kubeconfig));
    node_ = "gpu-node-" + RandomSuffix();
    CreateNode(*admin_, node_);
  }

  probes::PublisherOptions Options() const {
    probes::PublisherOptions options;
    options.node_name = node_;
    options.retry = {100ms, 500ms, 2.0, 0.5};
    options.request_poll = 100ms;
    options.clock = SteppingClock();
    return options;
  }

  Json Node() { return admin_->Get("/api/v1/nodes/" + node_).Json(); }
  Json Validation() {
    return admin_->Get("/apis/ncclguard.io/v1alpha1/nodevalidations/" + node_).Json();
  }

  ControlPlaneInfo info_;
  std::unique_ptr<TestKubeClient> admin_;
  std::shared_ptr<kube::Client> client_;
  std::string node_;
};

TEST_F(ProbePublishTest, PassThenFailFlipsTheLabelAndTheConditionOnce) {
  std::string tree = "p5-32efa";
  int efa = 32;
  probes::NodePublisher publisher(
      client_, [&] { return FixtureReport(tree, efa, "ignored-the-publisher-names-it"); },
      Options());
  kube::StopToken stop;

  ASSERT_TRUE(publisher.RunOnce(stop));
  Json validation = Validation();
  EXPECT_EQ(validation["metadata"]["name"], node_);
  EXPECT_EQ(validation["status"]["summary"], "Pass");
  EXPECT_EQ(validation["status"]["instanceType"], "p5.48xlarge");
  EXPECT_FALSE(validation["status"]["probeVersion"].get<std::string>().empty());
  EXPECT_FALSE(validation["status"]["lastProbeTime"].get<std::string>().empty());
  EXPECT_EQ(CheckOf(validation, "efa-device-count")["status"], "Pass");
  Json node = Node();
  EXPECT_EQ(node["metadata"]["labels"]["ncclguard.io/validated"], "true");
  EXPECT_EQ(node["metadata"]["labels"]["node.kubernetes.io/instance-type"], "p5.48xlarge");
  const Json ready = Condition(node, "NcclReady");
  ASSERT_TRUE(ready.is_object()) << node["status"].dump();
  EXPECT_EQ(ready["status"], "True");
  EXPECT_EQ(ready["reason"], "ChecksPassed");
  EXPECT_EQ(Condition(node, "Ready")["reason"], "KubeletReady") << "the kubelet's condition stays";

  // 30 of 32 EFA devices: the same objects flip.
  tree = "p5-30efa";
  efa = 30;
  ASSERT_TRUE(publisher.RunOnce(stop));
  validation = Validation();
  EXPECT_EQ(validation["status"]["summary"], "Fail");
  EXPECT_EQ(CheckOf(validation, "efa-device-count")["status"], "Fail");
  node = Node();
  EXPECT_EQ(node["metadata"]["labels"]["ncclguard.io/validated"], "false");
  const Json not_ready = Condition(node, "NcclReady");
  EXPECT_EQ(not_ready["status"], "False");
  EXPECT_EQ(not_ready["reason"], "ChecksFailed");
  EXPECT_NE(not_ready["message"].get<std::string>().find("efa-device-count"), std::string::npos)
      << not_ready["message"];
  EXPECT_NE(not_ready["lastTransitionTime"], ready["lastTransitionTime"]);

  // Still failing: the heartbeat moves, the transition time does not.
  ASSERT_TRUE(publisher.RunOnce(stop));
  const Json still = Condition(Node(), "NcclReady");
  EXPECT_EQ(still["status"], "False");
  EXPECT_EQ(still["lastTransitionTime"], not_ready["lastTransitionTime"]);
  EXPECT_NE(still["lastHeartbeatTime"], not_ready["lastHeartbeatTime"]);
  EXPECT_EQ(Condition(Node(), "Ready")["reason"], "KubeletReady");

  const probes::PublisherStats stats = publisher.stats();
  EXPECT_EQ(stats.probes, 3);
  EXPECT_EQ(stats.publishes, 3);
  EXPECT_EQ(stats.publish_failures, 0);
}

TEST_F(ProbePublishTest, TheRequestAnnotationTriggersARunAndIsCleared) {
  std::atomic<int> runs{0};
  probes::PublisherOptions options = Options();
  options.interval = 1h;  // only a request can cause a second run within the test
  probes::NodePublisher publisher(
      client_,
      [&] {
        probes::ProbeReport report = FixtureReport("p5-32efa", 32, node_);
        report.probe_time += std::chrono::minutes(++runs);  // distinct at second resolution
        return report;
      },
      options);
  kube::StopToken stop;
  std::thread loop([&] { publisher.Run(stop); });

  ASSERT_TRUE(Eventually([&] { return publisher.stats().publishes == 1; }, 30s));
  const std::string first_probe_time = Validation()["status"]["lastProbeTime"].get<std::string>();
  EXPECT_EQ(runs.load(), 1);

  const KubeResponse annotated = admin_->Request(
      "PATCH", "/apis/ncclguard.io/v1alpha1/nodevalidations/" + node_,
      Json{{"metadata", {{"annotations", {{"ncclguard.io/probe-requested", "1"}}}}}}.dump(),
      "application/merge-patch+json");
  ASSERT_EQ(annotated.status, 200) << annotated.body;

  EXPECT_TRUE(Eventually([&] { return publisher.stats().publishes == 2; }, 30s));
  EXPECT_TRUE(Eventually(
      [&] {
        const Json validation = Validation();
        return !validation["metadata"].contains("annotations") ||
               !validation["metadata"]["annotations"].contains("ncclguard.io/probe-requested");
      },
      10s))
      << Validation()["metadata"].dump();
  EXPECT_EQ(runs.load(), 2);
  const probes::PublisherStats stats = publisher.stats();
  EXPECT_EQ(stats.requested_runs, 1);
  EXPECT_EQ(stats.requests_cleared, 1);

  const auto asked = std::chrono::steady_clock::now();
  stop.Stop();
  loop.join();
  EXPECT_LT(std::chrono::steady_clock::now() - asked, 2s) << "stop ends the wait at once";
  EXPECT_EQ(runs.load(), 2) << "no run without a request or the interval";
  EXPECT_NE(Validation()["status"]["lastProbeTime"], first_probe_time);
}

TEST_F(ProbePublishTest, ARequestMadeDuringARunGetsARunOfItsOwn) {
  std::atomic<int> runs{0};
  TestKubeClient during_run(info_);  // the probe runs on the loop's thread
  auto request = [this](TestKubeClient& client, const std::string& value) {
    return client.Request(
        "PATCH", "/apis/ncclguard.io/v1alpha1/nodevalidations/" + node_,
        Json{{"metadata", {{"annotations", {{"ncclguard.io/probe-requested", value}}}}}}.dump(),
        "application/merge-patch+json");
  };
  probes::PublisherOptions options = Options();
  options.interval = 1h;
  probes::NodePublisher publisher(
      client_,
      [&] {
        // While the run answering request "1" is probing, someone asks again.
        if (++runs == 2) {
          EXPECT_EQ(request(during_run, "2").status, 200);
        }
        return FixtureReport("p5-32efa", 32, node_);
      },
      options);
  kube::StopToken stop;
  std::thread loop([&] { publisher.Run(stop); });
  ASSERT_TRUE(Eventually([&] { return publisher.stats().publishes == 1; }, 30s));
  ASSERT_EQ(request(*admin_, "1").status, 200);

  EXPECT_TRUE(Eventually([&] { return publisher.stats().publishes == 3; }, 30s))
      << "publishes: " << publisher.stats().publishes;
  EXPECT_TRUE(Eventually(
      [&] {
        const Json validation = Validation();
        return !validation["metadata"].contains("annotations") ||
               !validation["metadata"]["annotations"].contains("ncclguard.io/probe-requested");
      },
      10s));
  stop.Stop();
  loop.join();
  EXPECT_EQ(runs.load(), 3);
  const probes::PublisherStats stats = publisher.stats();
  EXPECT_EQ(stats.requested_runs, 2);
  EXPECT_EQ(stats.requests_cleared, 1) << "request 1 was not cleared over request 2";
}

// Its own control plane: stopping kube-apiserver must not disturb the other tests.
class ProbePublishRestartTest : public ProbePublishTest {
 protected:
  void SetUp() override {
    instance_ = std::make_unique<ControlPlane>(MakeTempDir("ncclguard-cp-probe-restart"));
    const ProcessResult started = instance_->Start();
    ASSERT_EQ(started.exit_code, 0) << started.stderr_text;
    Connect(instance_->info());
  }
  void TearDown() override {
    if (instance_) {
      EXPECT_EQ(instance_->Stop().exit_code, 0);
    }
  }
  std::unique_ptr<ControlPlane> instance_;
};

TEST_F(ProbePublishRestartTest, PublishingRetriesWhileTheApiServerIsAwayAndSucceedsAfter) {
  probes::NodePublisher publisher(
      client_, [&] { return FixtureReport("p5-30efa", 30, node_); }, Options());
  const ProcessResult stopped = instance_->StopApiServer();
  ASSERT_EQ(stopped.exit_code, 0) << stopped.stderr_text;

  kube::StopToken stop;
  std::optional<probes::ProbeReport> published;
  std::thread once([&] { published = publisher.RunOnce(stop); });
  EXPECT_TRUE(Eventually([&] { return publisher.stats().publish_failures >= 3; }, 30s))
      << "failures: " << publisher.stats().publish_failures;
  EXPECT_EQ(publisher.stats().publishes, 0);

  const ProcessResult restarted = instance_->StartApiServer();
  ASSERT_EQ(restarted.exit_code, 0) << restarted.stderr_text;
  EXPECT_TRUE(Eventually([&] { return publisher.stats().publishes == 1; }, 60s));
  stop.Stop();  // only matters if it never succeeded: the thread must end either way
  once.join();
  ASSERT_TRUE(published.has_value());
  EXPECT_EQ(Validation()["status"]["summary"], "Fail");
  const Json node = Node();
  EXPECT_EQ(node["metadata"]["labels"]["ncclguard.io/validated"], "false");
  EXPECT_EQ(Condition(node, "NcclReady")["status"], "False");
}

}  // namespace
}  // namespace ncclguard::testenv
