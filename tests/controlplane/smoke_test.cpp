// Smoke tests of the test control plane: the real kube-apiserver stores
// namespaces, CRDs, custom resources and pods, serves watches and dry-runs,
// and the cached kubectl and helm work against it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "controlplane_env.h"
#include "manifests.h"
#include "process.h"
#include "test_kube_client.h"

#ifndef NCCLGUARD_KUBERNETES_VERSION
#error "NCCLGUARD_KUBERNETES_VERSION must come from scripts/controlplane/versions.sh"
#endif

namespace ncclguard::testenv {
namespace {

using nlohmann::json;
using std::chrono::seconds;

json Pod(const std::string& name, const json& labels = json::object()) {
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"labels", labels}}},
      {"spec", {{"containers", {{{"name", "main"}, {"image", "registry.invalid/trainer:1"}}}}}}};
}

json PyTorchJob(const std::string& name) {
  json worker = {
      {"replicas", 2},
      {"template",
       {{"spec",
         {{"containers", {{{"name", "pytorch"}, {"image", "registry.invalid/trainer:1"}}}}}}}}};
  return {{"apiVersion", "kubeflow.org/v1"},
          {"kind", "PyTorchJob"},
          {"metadata", {{"name", name}}},
          {"spec", {{"pytorchReplicaSpecs", {{"Worker", worker}}}}}};
}

std::string ResourceVersion(TestKubeClient& client, const std::string& list_path) {
  KubeResponse list = client.Get(list_path);
  EXPECT_EQ(list.status, 200) << list.error << list.body;
  return list.Json()["metadata"]["resourceVersion"].get<std::string>();
}

bool IsEvent(const json& event, const std::string& type, const std::string& name) {
  return event.value("type", "") == type && event["object"]["metadata"].value("name", "") == name;
}

class SmokeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = std::make_unique<TestKubeClient>(ControlPlaneEnvironment::Info());
    namespace_ = CreateTestNamespace(*client_, "smoke");
  }
  void TearDown() override {
    if (client_ && !namespace_.empty()) client_->Delete("/api/v1/namespaces/" + namespace_);
  }
  std::string PodsPath() const { return "/api/v1/namespaces/" + namespace_ + "/pods"; }
  std::string PyTorchJobsPath() const {
    return "/apis/kubeflow.org/v1/namespaces/" + namespace_ + "/pytorchjobs";
  }
  void ApplyTrainingCrds() {
    for (const char* kind : {"PyTorchJob", "MPIJob", "JobSet"}) {
      ApplyCrds(*client_, JobCrd(kind));
    }
  }

  std::unique_ptr<TestKubeClient> client_;
  std::string namespace_;
};

TEST_F(SmokeTest, ApiServerReportsPinnedVersion) {
  KubeResponse version = client_->Get("/version");
  ASSERT_EQ(version.status, 200) << version.error << version.body;
  EXPECT_EQ(version.Json()["gitVersion"], NCCLGUARD_KUBERNETES_VERSION);
}

TEST_F(SmokeTest, NamespaceIsCreatedAndActive) {
  KubeResponse ns = client_->Get("/api/v1/namespaces/" + namespace_);
  ASSERT_EQ(ns.status, 200) << ns.body;
  EXPECT_EQ(ns.Json()["status"]["phase"], "Active");
}

TEST_F(SmokeTest, TrainingJobCrdsBecomeEstablished) {
  ASSERT_NO_THROW(ApplyTrainingCrds());
  for (const char* name :
       {"pytorchjobs.kubeflow.org", "mpijobs.kubeflow.org", "jobsets.jobset.x-k8s.io"}) {
    EXPECT_EQ(client_->Get(CrdPath(name)).status, 200) << name;
  }
  // Applying again is a no-op, so every test binary may apply them.
  EXPECT_NO_THROW(ApplyCrds(*client_, JobCrd("PyTorchJob")));
}

TEST_F(SmokeTest, CreatesPyTorchJobAndPodAndKeepsUnknownFields) {
  ASSERT_NO_THROW(ApplyTrainingCrds());
  KubeResponse job = client_->Post(PyTorchJobsPath(), PyTorchJob("train"));
  ASSERT_EQ(job.status, 201) << job.body;
  EXPECT_EQ(job.Json()["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"], 2);

  KubeResponse pod = client_->Post(PodsPath(), Pod("worker-0", {{"app", "train"}}));
  ASSERT_EQ(pod.status, 201) << pod.body;
  KubeResponse got = client_->Get(PodsPath() + "/worker-0");
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.Json()["metadata"]["labels"]["app"], "train");
}

TEST_F(SmokeTest, StatusSubresourceUpdatesOnlyStatus) {
  ASSERT_NO_THROW(ApplyTrainingCrds());
  ASSERT_EQ(client_->Post(PyTorchJobsPath(), PyTorchJob("train")).status, 201);
  json patch = {{"status", {{"conditions", {{{"type", "Created"}, {"status", "True"}}}}}},
                {"spec", {{"runPolicy", {{"suspend", true}}}}}};
  KubeResponse patched = client_->Request("PATCH", PyTorchJobsPath() + "/train/status",
                                          patch.dump(), "application/merge-patch+json");
  ASSERT_EQ(patched.status, 200) << patched.body;
  json job = client_->Get(PyTorchJobsPath() + "/train").Json();
  EXPECT_EQ(job["status"]["conditions"][0]["type"], "Created");
  EXPECT_FALSE(job["spec"].contains("runPolicy"))
      << "the status subresource must ignore spec changes";
}

TEST_F(SmokeTest, PodWatchSeesAddedModifiedDeleted) {
  std::string from = ResourceVersion(*client_, PodsPath());
  ASSERT_EQ(client_->Post(PodsPath(), Pod("watched")).status, 201);
  KubeResponse labeled =
      client_->Request("PATCH", PodsPath() + "/watched",
                       R"({"metadata":{"labels":{"step":"two"}}})", "application/merge-patch+json");
  ASSERT_EQ(labeled.status, 200) << labeled.body;
  ASSERT_EQ(client_->Delete(PodsPath() + "/watched?gracePeriodSeconds=0").status, 200);

  // Watching from the list's resourceVersion replays what happened since.
  WatchResult watch = client_->Watch(
      PodsPath() + "?resourceVersion=" + from,
      [](const json& e) { return IsEvent(e, "DELETED", "watched"); }, seconds(20));
  ASSERT_TRUE(watch.matched) << watch.error;
  std::vector<std::string> types;
  for (const auto& event : watch.events) types.push_back(event["type"]);
  ASSERT_GE(types.size(), 3u);
  EXPECT_EQ(types.front(), "ADDED");
  EXPECT_NE(std::find(types.begin(), types.end(), "MODIFIED"), types.end());
  EXPECT_EQ(types.back(), "DELETED");
}

TEST_F(SmokeTest, LiveWatchStreamsPyTorchJobEvents) {
  ASSERT_NO_THROW(ApplyTrainingCrds());
  std::string from = ResourceVersion(*client_, PyTorchJobsPath());
  auto watch = std::async(std::launch::async, [&] {
    TestKubeClient watcher(ControlPlaneEnvironment::Info());
    return watcher.Watch(
        PyTorchJobsPath() + "?resourceVersion=" + from,
        [](const json& e) { return IsEvent(e, "DELETED", "live"); }, seconds(30));
  });
  ASSERT_EQ(client_->Post(PyTorchJobsPath(), PyTorchJob("live")).status, 201);
  KubeResponse patched = client_->Request("PATCH", PyTorchJobsPath() + "/live",
                                          R"({"spec":{"runPolicy":{"suspend":true}}})",
                                          "application/merge-patch+json");
  ASSERT_EQ(patched.status, 200) << patched.body;
  ASSERT_EQ(client_->Delete(PyTorchJobsPath() + "/live").status, 200);

  WatchResult result = watch.get();
  ASSERT_TRUE(result.matched) << result.error;
  ASSERT_EQ(result.events.size(), 3u);
  EXPECT_EQ(result.events[0]["type"], "ADDED");
  EXPECT_EQ(result.events[1]["type"], "MODIFIED");
  EXPECT_EQ(result.events[1]["object"]["spec"]["runPolicy"]["suspend"], true);
}

TEST_F(SmokeTest, ServerSideDryRunCreatesNothing) {
  ASSERT_NO_THROW(ApplyTrainingCrds());
  KubeResponse pod = client_->Post(PodsPath() + "?dryRun=All", Pod("dry"));
  ASSERT_EQ(pod.status, 201) << pod.body;
  EXPECT_EQ(pod.Json()["metadata"]["name"], "dry");
  KubeResponse job = client_->Post(PyTorchJobsPath() + "?dryRun=All", PyTorchJob("dry"));
  ASSERT_EQ(job.status, 201) << job.body;

  EXPECT_EQ(client_->Get(PodsPath() + "/dry").status, 404);
  EXPECT_EQ(client_->Get(PyTorchJobsPath() + "/dry").status, 404);
  EXPECT_TRUE(client_->Get(PodsPath()).Json()["items"].empty());
}

TEST_F(SmokeTest, DeleteRemovesObjects) {
  ASSERT_NO_THROW(ApplyTrainingCrds());
  ASSERT_EQ(client_->Post(PyTorchJobsPath(), PyTorchJob("gone")).status, 201);
  ASSERT_EQ(client_->Post(PodsPath(), Pod("gone")).status, 201);
  // No kubelet runs, so a pod is only removed at once with a zero grace period.
  EXPECT_EQ(client_->Delete(PodsPath() + "/gone?gracePeriodSeconds=0").status, 200);
  EXPECT_EQ(client_->Delete(PyTorchJobsPath() + "/gone").status, 200);
  EXPECT_TRUE(
      Eventually([&] { return client_->Get(PodsPath() + "/gone").status == 404; }, seconds(10)));
  EXPECT_TRUE(Eventually([&] { return client_->Get(PyTorchJobsPath() + "/gone").status == 404; },
                         seconds(10)));
}

TEST_F(SmokeTest, RejectsInvalidObjectsWithReason) {
  json bad = Pod("Not_A_Valid_Name");
  KubeResponse created = client_->Post(PodsPath(), bad);
  EXPECT_EQ(created.status, 422);
  EXPECT_EQ(created.Json()["reason"], "Invalid");
}

TEST(ControlPlaneTools, KubectlVersionPrintsPinnedVersions) {
  const ControlPlaneInfo& info = ControlPlaneEnvironment::Info();
  ProcessResult version = RunProcess({info.bin_dir + "/kubectl", "version", "-o", "json"},
                                     {{"KUBECONFIG", info.kubeconfig}});
  ASSERT_EQ(version.exit_code, 0) << version.stderr_text;
  json parsed = json::parse(version.stdout_text);
  EXPECT_EQ(parsed["clientVersion"]["gitVersion"], NCCLGUARD_KUBERNETES_VERSION);
  EXPECT_EQ(parsed["serverVersion"]["gitVersion"], NCCLGUARD_KUBERNETES_VERSION);
}

TEST(ControlPlaneTools, KubectlAppliesManifests) {
  const ControlPlaneInfo& info = ControlPlaneEnvironment::Info();
  ProcessResult applied = RunProcess({info.bin_dir + "/kubectl", "apply", "--server-side", "-f",
                                      TestCrdDir(), "-f", JobCrd("PyTorchJob")},
                                     {{"KUBECONFIG", info.kubeconfig}});
  ASSERT_EQ(applied.exit_code, 0) << applied.stderr_text;
  EXPECT_NE(applied.stdout_text.find("pytorchjobs.kubeflow.org"), std::string::npos)
      << applied.stdout_text;
  EXPECT_NE(applied.stdout_text.find("mpijobs.kubeflow.org"), std::string::npos)
      << applied.stdout_text;
}

TEST(ControlPlaneTools, HelmRunsAgainstTheApiServer) {
  const ControlPlaneInfo& info = ControlPlaneEnvironment::Info();
  std::string helm_home = MakeTempDir("ncclguard-helm");
  std::map<std::string, std::string> env = {{"KUBECONFIG", info.kubeconfig},
                                            {"HELM_CACHE_HOME", helm_home + "/cache"},
                                            {"HELM_CONFIG_HOME", helm_home + "/config"},
                                            {"HELM_DATA_HOME", helm_home + "/data"}};
  ProcessResult version = RunProcess({info.bin_dir + "/helm", "version", "--short"}, env);
  ASSERT_EQ(version.exit_code, 0) << version.stderr_text;
  EXPECT_TRUE(version.stdout_text.starts_with(NCCLGUARD_HELM_VERSION)) << version.stdout_text;

  ProcessResult list =
      RunProcess({info.bin_dir + "/helm", "list", "--all-namespaces", "-o", "json"}, env);
  ASSERT_EQ(list.exit_code, 0) << list.stderr_text;
  EXPECT_EQ(json::parse(list.stdout_text), json::array());
  std::filesystem::remove_all(helm_home);
}

}  // namespace
}  // namespace ncclguard::testenv
