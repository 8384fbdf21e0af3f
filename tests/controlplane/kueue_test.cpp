// ncclguard's preflight as a Kueue AdmissionCheck, against real Kueue (its manager and
// webhooks, tests/controlplane/kueue_harness.h) on the test kube-apiserver: Kueue creates the
// Workloads, reserves quota, evicts, requeues and resumes the jobs; the ncclguard controller
// (manager::Manager with --kueue-admission-check's wiring) only answers its check, and
// ncclguard's webhook runs as well. Skipped, saying why, when Kueue cannot be built here.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "controlplane_env.h"
#include "kube/config.h"
#include "kueue_harness.h"
#include "manager/manager.h"
#include "manifests.h"
#include "metrics/registry.h"
#include "process.h"
#include "served_webhook.h"
#include "test_kube_client.h"
#include "webhook_registration.h"

namespace ncclguard::testenv {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using webhook::testing::ServedWebhook;

constexpr auto kWait = 90s;

// The options with the Kueue AdmissionCheck controllers turned on, as --kueue-admission-check
// does.
manager::ManagerOptions WithKueue(manager::ManagerOptions options) {
  options.enable.insert("kueue-admission-check");
  return options;
}

// A Manager (with the Kueue AdmissionCheck controllers) on its own thread until Stop().
class RunningController {
 public:
  RunningController(const ControlPlaneInfo& info, manager::ManagerOptions options)
      : manager_(std::make_unique<manager::Manager>(kube::LoadKubeConfigFile(info.kubeconfig),
                                                    WithKueue(std::move(options)))) {
    thread_ = std::thread([this] { manager_->Run(stop_); });
  }
  ~RunningController() { Stop(); }
  void Stop() {
    stop_.Stop();
    if (thread_.joinable()) thread_.join();
  }
  manager::Manager& manager() { return *manager_; }

 private:
  std::unique_ptr<manager::Manager> manager_;
  kube::StopToken stop_;
  std::thread thread_;
};

json Rule(const std::string& group, const std::string& version, const std::string& resource,
          const json& operations) {
  return {{"apiGroups", {group}},
          {"apiVersions", {version}},
          {"operations", operations},
          {"resources", {resource}},
          {"scope", "Namespaced"}};
}

json ConditionOf(const json& object, const std::string& type) {
  for (const auto& c : object.value(json::json_pointer("/status/conditions"), json::array())) {
    if (c.value("type", "") == type) return c;
  }
  return json::object();
}

bool IsTrue(const json& object, const std::string& type) {
  return ConditionOf(object, type).value("status", "") == "True";
}

json EntryOf(const json& workload, const std::string& check) {
  for (const auto& e :
       workload.value(json::json_pointer("/status/admissionChecks"), json::array())) {
    if (e.value("name", "") == check) return e;
  }
  return json::object();
}

// Shared by the binary: Kueue built and running once (its webhooks registered), ncclguard's
// webhook served in-process for namespaces labelled ncclguard.io/enabled=true.
struct Shared {
  std::string skip;  // why the tests cannot run here
  std::unique_ptr<TestKubeClient> client;
  std::unique_ptr<KueueManager> kueue;
  std::unique_ptr<webhook::testing::ServedWebhook> webhook;
  std::vector<std::unique_ptr<WebhookRegistration>> registrations;
};
Shared* shared = nullptr;

class KueueAdmissionCheck : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    shared = new Shared();
    const ControlPlaneInfo& info = ControlPlaneEnvironment::Info();
    const KueueBuild build = BuildKueue(info);
    if (!build.error.empty()) {
      shared->skip = "Kueue cannot be built here: " + build.error;
      return;
    }
    if (RunProcess({"unshare", "--mount", "true"}).exit_code != 0) {
      shared->skip =
          "Kueue cannot run here: it reads a certificate from /etc/kueue/metrics/certs, which "
          "the harness provides in a mount namespace (unshare --mount needs root)";
      return;
    }
    shared->client = std::make_unique<TestKubeClient>(info);
    InstallKueueCrds(*shared->client);
    ApplyCrds(*shared->client, SourceDir() + "/crds/nodevalidation.yaml");
    ApplyCrds(*shared->client, SourceDir() + "/crds/ncclpolicy.yaml");
    shared->webhook = std::make_unique<webhook::testing::ServedWebhook>();
    for (WebhookKind kind : {WebhookKind::Mutating, WebhookKind::Validating}) {
      WebhookSpec spec;
      spec.kind = kind;
      spec.name = kind == WebhookKind::Mutating ? "ncclguard-mutate" : "ncclguard-validate";
      spec.url = shared->webhook->Url(kind == WebhookKind::Mutating ? "/mutate" : "/validate");
      spec.ca_bundle_pem = shared->webhook->ca_pem();
      const json operations =
          kind == WebhookKind::Mutating ? json{"CREATE"} : json{"CREATE", "UPDATE"};
      spec.rules = json::array({Rule("batch", "v1", "jobs", operations),
                                Rule("kubeflow.org", "v1", "pytorchjobs", operations),
                                Rule("trainer.kubeflow.org", "v1alpha1", "trainjobs", operations)});
      spec.namespace_selector = {{"matchLabels", {{"ncclguard.io/enabled", "true"}}}};
      spec.timeout_seconds = 10;
      shared->registrations.push_back(std::make_unique<WebhookRegistration>(*shared->client, spec));
    }
    shared->kueue = std::make_unique<KueueManager>(info, *shared->client, build.binary);
  }

  static void TearDownTestSuite() {
    if (shared == nullptr) return;
    shared->kueue.reset();
    shared->registrations.clear();
    shared->webhook.reset();
    delete shared;
    shared = nullptr;
  }

  void SetUp() override {
    if (!shared->skip.empty()) GTEST_SKIP() << shared->skip;
    ASSERT_TRUE(shared->kueue->ready()) << "Kueue did not become ready:\n" << shared->kueue->Log();
    client_ = shared->client.get();
    namespace_ = CreateTestNamespace(*client_, "kq", {{"ncclguard.io/enabled", "true"}});
    // This test's own flavor, instance type, checks and queues (cluster-scoped names).
    flavor_ = namespace_ + "-p5";
    check_ = namespace_ + "-preflight";
    manual_ = namespace_ + "-manual";
    queue_ = namespace_ + "-cq";
    instance_type_ = namespace_ + ".48xlarge";
    Create("/apis/kueue.x-k8s.io/v1beta2/resourceflavors",
           {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
            {"kind", "ResourceFlavor"},
            {"metadata", {{"name", flavor_}}},
            {"spec", {{"nodeLabels", {{"node.kubernetes.io/instance-type", InstanceType()}}}}}});
    Create("/apis/kueue.x-k8s.io/v1beta2/admissionchecks",
           {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
            {"kind", "AdmissionCheck"},
            {"metadata", {{"name", check_}}},
            {"spec", {{"controllerName", "ncclguard.io/preflight"}}}});
    cleanup_.push_back("/apis/kueue.x-k8s.io/v1beta2/admissionchecks/" + check_);
    cleanup_.push_back("/apis/kueue.x-k8s.io/v1beta2/resourceflavors/" + flavor_);
  }

  void TearDown() override {
    controllers_.clear();
    if (client_ == nullptr) return;
    client_->Delete("/api/v1/namespaces/" + namespace_);
    for (const std::string& node : nodes_) {
      client_->Delete("/api/v1/nodes/" + node);
      client_->Delete("/apis/ncclguard.io/v1alpha1/nodevalidations/" + node);
    }
    for (auto it = cleanup_.rbegin(); it != cleanup_.rend(); ++it) client_->Delete(*it);
  }

  // The ClusterQueue (GPU quota `gpus` on this test's flavor, `checks`) and LocalQueue "lq".
  void MakeQueues(int gpus, const std::vector<std::string>& checks) {
    json strategy = json::array();
    for (const std::string& check : checks) strategy.push_back({{"name", check}});
    json cluster_queue = {
        {"apiVersion", "kueue.x-k8s.io/v1beta2"},
        {"kind", "ClusterQueue"},
        {"metadata", {{"name", queue_}}},
        {"spec",
         {{"namespaceSelector", {{"matchLabels", {{"kubernetes.io/metadata.name", namespace_}}}}},
          {"resourceGroups",
           json::array(
               {{{"coveredResources", {"cpu", "nvidia.com/gpu"}},
                 {"flavors", json::array({{{"name", flavor_},
                                           {"resources",
                                            json::array({{{"name", "cpu"}, {"nominalQuota", 1000}},
                                                         {{"name", "nvidia.com/gpu"},
                                                          {"nominalQuota", gpus}}})}}})}}})},
          {"admissionChecksStrategy", {{"admissionChecks", strategy}}}}}};
    // Kueue refuses an empty list of checks: none is no strategy.
    if (checks.empty()) cluster_queue["spec"].erase("admissionChecksStrategy");
    Create("/apis/kueue.x-k8s.io/v1beta2/clusterqueues", cluster_queue);
    cleanup_.push_back("/apis/kueue.x-k8s.io/v1beta2/clusterqueues/" + queue_);
    Create("/apis/kueue.x-k8s.io/v1beta2/namespaces/" + namespace_ + "/localqueues",
           {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
            {"kind", "LocalQueue"},
            {"metadata", {{"name", "lq"}}},
            {"spec", {{"clusterQueue", queue_}}}});
  }

  void Create(const std::string& path, const json& object) {
    const KubeResponse created = client_->Post(path, object);
    ASSERT_EQ(created.status, 201) << path << ": " << created.body;
  }

  manager::ManagerOptions Options(bool elect = false, const std::string& identity = "") const {
    manager::ManagerOptions options;
    options.leader_elect = elect;
    options.workers = 4;
    options.cache_sync_timeout = 20s;
    options.lease_namespace = namespace_;
    options.lease_name = "ncclguard-controller";
    options.lease_duration = 4s;
    options.renew_deadline = 3s;
    options.retry_period = 500ms;
    options.identity = identity;
    return options;
  }

  RunningController& StartController(manager::ManagerOptions options) {
    controllers_.push_back(
        std::make_unique<RunningController>(ControlPlaneEnvironment::Info(), std::move(options)));
    return *controllers_.back();
  }

  // The nodes' instance type: one of this test's own unless the test names a real one (then
  // with its own flavor, UseFlavorFor) before it adds nodes.
  const std::string& InstanceType() const { return instance_type_; }

  // This test's flavor for the instance type `type` (and its nodes, from now on).
  void UseFlavorFor(const std::string& type) {
    instance_type_ = type;
    flavor_ = namespace_ + "-" + type;
    Create("/apis/kueue.x-k8s.io/v1beta2/resourceflavors",
           {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
            {"kind", "ResourceFlavor"},
            {"metadata", {{"name", flavor_}}},
            {"spec", {{"nodeLabels", {{"node.kubernetes.io/instance-type", type}}}}}});
    cleanup_.push_back("/apis/kueue.x-k8s.io/v1beta2/resourceflavors/" + flavor_);
  }

  void AddNode(const std::string& name, const std::string& summary) {
    const std::string unique = namespace_ + "-" + name;
    nodes_.push_back(unique);
    Create(
        "/api/v1/nodes",
        {{"apiVersion", "v1"},
         {"kind", "Node"},
         {"metadata",
          {{"name", unique}, {"labels", {{"node.kubernetes.io/instance-type", InstanceType()}}}}}});
    Create("/apis/ncclguard.io/v1alpha1/nodevalidations", {{"apiVersion", "ncclguard.io/v1alpha1"},
                                                           {"kind", "NodeValidation"},
                                                           {"metadata", {{"name", unique}}}});
    SetValidation(name, summary);
  }

  void SetValidation(const std::string& name, const std::string& summary) {
    json checks = json::array();
    if (summary == "Fail") {
      checks.push_back({{"id", "efa-device-count"},
                        {"status", "Fail"},
                        {"observed", "30"},
                        {"expected", "32"},
                        {"message", "30 of 32 EFA devices"}});
    }
    const KubeResponse status = client_->Request(
        "PATCH",
        "/apis/ncclguard.io/v1alpha1/nodevalidations/" + namespace_ + "-" + name + "/status",
        json{{"status",
              {{"instanceType", InstanceType()},
               {"summary", summary},
               {"lastProbeTime", "2026-12-02T14:00:00Z"},
               {"probeVersion", "test"},
               {"checks", checks}}}}
            .dump(),
        "application/merge-patch+json");
    ASSERT_EQ(status.status, 200) << status.body;
  }

  // A GPU pod template with no instance type of its own: the flavor's nodeLabels give it.
  static json GpuTemplate() {
    return {{"spec",
             {{"restartPolicy", "Never"},
              {"containers",
               {{{"name", "trainer"},
                 {"image", "registry.invalid/trainer:1"},
                 {"resources",
                  {{"requests", {{"cpu", "1"}, {"nvidia.com/gpu", 8}}},
                   {"limits", {{"nvidia.com/gpu", 8}}}}}}}}}}};
  }

  std::string Jobs() const { return "/apis/batch/v1/namespaces/" + namespace_ + "/jobs"; }
  std::string PyTorchJobs() const {
    return "/apis/kubeflow.org/v1/namespaces/" + namespace_ + "/pytorchjobs";
  }

  // A batch Job of `pods` GPU pods, queued in "lq" unless `queued` is false.
  json BatchJob(const std::string& name, int pods, bool queued = true) const {
    json labels = {{"ncclguard.io/managed", "true"}};
    if (queued) labels["kueue.x-k8s.io/queue-name"] = "lq";
    return {{"apiVersion", "batch/v1"},
            {"kind", "Job"},
            {"metadata", {{"name", name}, {"labels", labels}}},
            {"spec",
             {{"parallelism", pods},
              {"completions", pods},
              {"suspend", false},
              {"template", GpuTemplate()}}}};
  }

  json PyTorchJob(const std::string& name, int workers, bool queued = true) const {
    json job = {{"apiVersion", "kubeflow.org/v1"},
                {"kind", "PyTorchJob"},
                {"metadata", {{"name", name}}},
                {"spec",
                 {{"pytorchReplicaSpecs",
                   {{"Master", {{"replicas", 1}, {"template", GpuTemplate()}}},
                    {"Worker", {{"replicas", workers}, {"template", GpuTemplate()}}}}}}}};
    if (queued) job["metadata"]["labels"] = {{"kueue.x-k8s.io/queue-name", "lq"}};
    return job;
  }

  std::string TrainJobs() const {
    return "/apis/trainer.kubeflow.org/v1alpha1/namespaces/" + namespace_ + "/trainjobs";
  }

  // Trainer's torch-distributed ClusterTrainingRuntime (manifests/base/runtimes of the pinned
  // Trainer module) as this test's own, its trainer pods on `instance_type` nodes.
  void MakeTorchRuntime(const std::string& name, const std::string& instance_type) {
    const std::vector<json> documents =
        LoadYamlDocuments(PinnedModuleDir("github.com/kubeflow/trainer/v2", "TRAINER_VERSION") +
                          "/manifests/base/runtimes/torch_distributed.yaml");
    ASSERT_EQ(documents.size(), 1u);
    json runtime = documents[0];
    ASSERT_EQ(runtime.value("kind", ""), "ClusterTrainingRuntime");
    runtime["metadata"]["name"] = name;
    json& jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"];
    ASSERT_EQ(jobs.size(), 1u);
    ASSERT_EQ(jobs[0].value("name", ""), "node");
    jobs[0]["template"]["spec"]["template"]["spec"]["nodeSelector"] = {
        {"node.kubernetes.io/instance-type", instance_type}};
    Create("/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes", runtime);
    cleanup_.push_back("/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/" + name);
  }

  // A TrainJob of `nodes` nodes of 8 GPUs each on the runtime `runtime`, queued in "lq".
  static json TrainJob(const std::string& name, const std::string& runtime, int nodes) {
    return {{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
            {"kind", "TrainJob"},
            {"metadata", {{"name", name}, {"labels", {{"kueue.x-k8s.io/queue-name", "lq"}}}}},
            {"spec",
             {{"runtimeRef", {{"name", runtime}}},
              {"trainer",
               {{"image", "registry.invalid/trainer:1"},
                {"numNodes", nodes},
                {"resourcesPerNode",
                 {{"requests", {{"cpu", "1"}, {"nvidia.com/gpu", 8}}},
                  {"limits", {{"nvidia.com/gpu", 8}}}}}}}}}};
  }

  json Get(const std::string& path) {
    const KubeResponse r = client_->Get(path);
    return r.status == 200 ? r.Json() : json(nullptr);
  }

  // The Workload Kueue made for the job `owner` (null until it exists).
  json WorkloadOf(const std::string& owner) {
    const json list = Get("/apis/kueue.x-k8s.io/v1beta2/namespaces/" + namespace_ + "/workloads");
    if (list.is_null()) return nullptr;
    for (const json& workload : list.value("items", json::array())) {
      for (const json& ref :
           workload.value(json::json_pointer("/metadata/ownerReferences"), json::array())) {
        if (ref.value("name", "") == owner) return workload;
      }
    }
    return nullptr;
  }

  // Waits until `pred` holds for the job's Workload; returns it (null on timeout).
  json WaitForWorkload(const std::string& owner, const std::function<bool(const json&)>& pred) {
    json last;
    const bool ok = Eventually(
        [&] {
          last = WorkloadOf(owner);
          return !last.is_null() && pred(last);
        },
        kWait, 200ms);
    if (!ok) ADD_FAILURE() << "Workload of " << owner << " never matched; last: " << last.dump();
    return ok ? last : json(nullptr);
  }

  bool CheckPendingWithMessage(const json& workload, const std::string& text) {
    const json entry = EntryOf(workload, check_);
    return IsTrue(workload, "QuotaReserved") && entry.value("state", "") == "Pending" &&
           entry.value("message", "").find(text) != std::string::npos;
  }

  TestKubeClient* client_ = nullptr;
  std::string namespace_, flavor_, check_, manual_, queue_, instance_type_;
  std::vector<std::string> nodes_, cleanup_;
  std::vector<std::unique_ptr<RunningController>> controllers_;
};

// Issue test 1: a queued batch Job and a queued PyTorchJob wait on the check with the gate's
// message while a node fails, stay suspended, and are admitted and resumed once it passes,
// with the validated nodeSelector; ncclguard's gate never marks them.
TEST_F(KueueAdmissionCheck, QueuedJobsWaitOnTheCheckThenKueueAdmitsThem) {
  MakeQueues(64, {check_});
  for (const char* n : {"a", "b", "c"}) AddNode(n, "Pass");
  AddNode("x", "Fail");
  StartController(Options());
  Create(Jobs(), BatchJob("train", 4));
  Create(PyTorchJobs(), PyTorchJob("llama", 3));

  const std::string held = "3/4 " + InstanceType() + " nodes validated; node " + namespace_ +
                           "-x failed efa-device-count: 30 of 32 EFA devices";
  for (const char* owner : {"train", "llama"}) {
    const json workload =
        WaitForWorkload(owner, [&](const json& w) { return CheckPendingWithMessage(w, held); });
    ASSERT_FALSE(workload.is_null());
    // The failed check's own guide section (efa-device-count: EFA configuration).
    EXPECT_NE(EntryOf(workload, check_).value("message", "").find("guide.md#efa-config"),
              std::string::npos);
    EXPECT_FALSE(IsTrue(workload, "Admitted"));
  }
  // The controller's gauge of its checks (this process's metrics, as --metrics-listen serves
  // them); other tests' Workloads may still be there.
  const auto checks_in = [](const std::string& state) {
    const std::string text = metrics::Render();
    const std::string prefix = "ncclguard_kueue_admission_checks{state=\"" + state + "\"} ";
    const auto at = text.find(prefix);
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + prefix.size()));
  };
  EXPECT_TRUE(Eventually([&] { return checks_in("Pending") >= 2; }, kWait)) << metrics::Render();
  EXPECT_EQ(checks_in("Rejected"), 0);
  // Still suspended by Kueue, and never marked by our gate.
  const json job = Get(Jobs() + "/train");
  EXPECT_TRUE(job.value(json::json_pointer("/spec/suspend"), false));
  EXPECT_FALSE(job.contains(json::json_pointer("/metadata/annotations/ncclguard.io~1gate")));
  const json pytorch = Get(PyTorchJobs() + "/llama");
  EXPECT_TRUE(pytorch.value(json::json_pointer("/spec/runPolicy/suspend"), false));
  EXPECT_FALSE(pytorch.contains(json::json_pointer("/metadata/annotations/ncclguard.io~1gate")));

  SetValidation("x", "Pass");
  const json selector = {{"ncclguard.io/validated", "true"}};
  for (const char* owner : {"train", "llama"}) {
    const json workload = WaitForWorkload(owner, [&](const json& w) {
      return EntryOf(w, check_).value("state", "") == "Ready" && IsTrue(w, "Admitted");
    });
    ASSERT_FALSE(workload.is_null());
    const json updates = EntryOf(workload, check_).value("podSetUpdates", json::array());
    ASSERT_FALSE(updates.empty());
    for (const json& update : updates) EXPECT_EQ(update["nodeSelector"], selector);
  }
  EXPECT_TRUE(Eventually([&] { return checks_in("Ready") >= 2; }, kWait)) << metrics::Render();
  // Kueue resumed both and put the validated nodeSelector on their pods.
  json resumed;
  ASSERT_TRUE(Eventually(
      [&] {
        resumed = Get(Jobs() + "/train");
        return !resumed.value(json::json_pointer("/spec/suspend"), true);
      },
      kWait))
      << resumed.dump();
  EXPECT_EQ(resumed.value(
                json::json_pointer("/spec/template/spec/nodeSelector/ncclguard.io~1validated"), ""),
            "true");
  EXPECT_FALSE(resumed.contains(json::json_pointer("/metadata/annotations/ncclguard.io~1gate")));
  ASSERT_TRUE(Eventually(
      [&] {
        resumed = Get(PyTorchJobs() + "/llama");
        return !resumed.value(json::json_pointer("/spec/runPolicy/suspend"), true);
      },
      kWait))
      << resumed.dump();
  EXPECT_EQ(resumed.value(json::json_pointer("/spec/pytorchReplicaSpecs/Worker/template/spec/"
                                             "nodeSelector/ncclguard.io~1validated"),
                          ""),
            "true");
}

// Audit mode (docs/operator.md "Audit mode"): in a namespace labelled ncclguard.io/mode=audit the
// check answers Ready at once, while a node fails, saying what it would have held; Kueue admits
// and resumes the job without the validated nodeSelector.
TEST_F(KueueAdmissionCheck, InAnAuditNamespaceTheCheckIsReadyAtOnceSayingWhatItWouldHaveHeld) {
  const json label = {{"metadata", {{"labels", {{"ncclguard.io/mode", "audit"}}}}}};
  ASSERT_EQ(client_
                ->Request("PATCH", "/api/v1/namespaces/" + namespace_, label.dump(),
                          "application/merge-patch+json")
                .status,
            200);
  MakeQueues(64, {check_});
  for (const char* n : {"a", "b", "c"}) AddNode(n, "Pass");
  AddNode("x", "Fail");
  StartController(Options());
  Create(Jobs(), BatchJob("train", 4));

  const json workload = WaitForWorkload("train", [&](const json& w) {
    return EntryOf(w, check_).value("state", "") == "Ready" && IsTrue(w, "Admitted");
  });
  ASSERT_FALSE(workload.is_null());
  const json entry = EntryOf(workload, check_);
  EXPECT_EQ(
      entry.value("message", "")
          .rfind("audit mode: ncclguard would hold this Workload until enough validated nodes "
                 "exist, and did not: 3/4 " +
                     InstanceType() + " nodes validated",
                 0),
      0u)
      << entry.dump();
  EXPECT_FALSE(entry.contains("podSetUpdates")) << entry.dump();
  json resumed;
  ASSERT_TRUE(Eventually(
      [&] {
        resumed = Get(Jobs() + "/train");
        return !resumed.value(json::json_pointer("/spec/suspend"), true);
      },
      kWait))
      << resumed.dump();
  EXPECT_FALSE(resumed.contains(
      json::json_pointer("/spec/template/spec/nodeSelector/ncclguard.io~1validated")))
      << resumed.dump();
  EXPECT_FALSE(resumed.contains(json::json_pointer("/metadata/annotations/ncclguard.io~1gate")));
}

// Issue test 2: past the hold timeout the check answers Retry; Kueue releases the quota (the
// Workload is evicted), requeues it after requeueAfterSeconds and counts the retry; once the
// node passes the check is Ready and the job admitted.
TEST_F(KueueAdmissionCheck, HoldTimeoutRetriesReleasesQuotaAndRequeues) {
  MakeQueues(32, {check_});
  for (const char* n : {"a", "b", "c"}) AddNode(n, "Pass");
  AddNode("x", "Fail");
  manager::ManagerOptions options = Options();
  options.base_policy.gate.hold_timeout_seconds = 2;
  options.base_policy.gate.retry_after_seconds = 1;
  StartController(options);
  Create(Jobs(), BatchJob("train", 4));

  // Watch the Workload's history: Retry answered, quota released, requeued with a retry count.
  bool saw_retry = false, saw_released = false;
  ASSERT_FALSE(WaitForWorkload("train", [](const json&) { return true; }).is_null());
  const std::string path = "/apis/kueue.x-k8s.io/v1beta2/namespaces/" + namespace_ + "/workloads";
  const WatchResult watched = client_->Watch(
      path,
      [&](const json& event) {
        const json& w = event["object"];
        const json entry = EntryOf(w, check_);
        if (entry.value("state", "") == "Retry") {
          saw_retry = true;
          EXPECT_EQ(entry.value("requeueAfterSeconds", 0), 1);
        }
        if (saw_retry && !IsTrue(w, "QuotaReserved")) saw_released = true;
        return saw_released && IsTrue(w, "QuotaReserved") && entry.value("retryCount", 0) >= 1;
      },
      kWait);
  EXPECT_TRUE(saw_retry);
  EXPECT_TRUE(saw_released);
  ASSERT_TRUE(watched.matched) << watched.error;

  SetValidation("x", "Pass");
  const json workload = WaitForWorkload("train", [&](const json& w) {
    return EntryOf(w, check_).value("state", "") == "Ready" && IsTrue(w, "Admitted");
  });
  ASSERT_FALSE(workload.is_null());
  EXPECT_GE(EntryOf(workload, check_).value("retryCount", 0), 1);
  EXPECT_NE(EntryOf(workload, check_).value("state", ""), "Rejected");
}

// Issue test 3: the controller stopped mid-flight, the node passing while none runs, and a
// new replica taking the Lease: the Workload is answered, and another check controller's entry
// on the same Workload is never overwritten (the applies name only our entry).
TEST_F(KueueAdmissionCheck, RestartAndLeaderChangeLoseNothingAndOverwriteNoOtherEntry) {
  Create("/apis/kueue.x-k8s.io/v1beta2/admissionchecks",
         {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
          {"kind", "AdmissionCheck"},
          {"metadata", {{"name", manual_}}},
          {"spec", {{"controllerName", "example.com/manual-approval"}}}});
  cleanup_.push_back("/apis/kueue.x-k8s.io/v1beta2/admissionchecks/" + manual_);
  // The other check controller, played by the test: its AdmissionCheck Active, its entry Ready.
  const KubeResponse active = client_->Request(
      "PATCH",
      "/apis/kueue.x-k8s.io/v1beta2/admissionchecks/" + manual_ +
          "/status?fieldManager=manual-approval&force=true",
      json{{"apiVersion", "kueue.x-k8s.io/v1beta2"},
           {"kind", "AdmissionCheck"},
           {"metadata", {{"name", manual_}}},
           {"status",
            {{"conditions", json::array({{{"type", "Active"},
                                          {"status", "True"},
                                          {"reason", "Active"},
                                          {"message", "test"},
                                          {"lastTransitionTime", "2026-12-02T14:00:00Z"}}})}}}}
          .dump(),
      "application/apply-patch+yaml");
  ASSERT_EQ(active.status, 200) << active.body;
  MakeQueues(32, {check_, manual_});
  for (const char* n : {"a", "b", "c"}) AddNode(n, "Pass");
  AddNode("x", "Fail");
  RunningController& first = StartController(Options(true, "first"));
  Create(Jobs(), BatchJob("train", 4));
  json workload =
      WaitForWorkload("train", [&](const json& w) { return CheckPendingWithMessage(w, "3/4"); });
  ASSERT_FALSE(workload.is_null());
  const std::string name = workload["metadata"]["name"];
  const KubeResponse approved = client_->Request(
      "PATCH",
      "/apis/kueue.x-k8s.io/v1beta2/namespaces/" + namespace_ + "/workloads/" + name +
          "/status?fieldManager=manual-approval&force=true",
      json{{"apiVersion", "kueue.x-k8s.io/v1beta2"},
           {"kind", "Workload"},
           {"metadata", {{"name", name}, {"namespace", namespace_}}},
           {"status",
            {{"admissionChecks", json::array({{{"name", manual_},
                                               {"state", "Ready"},
                                               {"message", "approved by the test"},
                                               {"lastTransitionTime", "2026-12-02T14:00:00Z"}}})}}}}
          .dump(),
      "application/apply-patch+yaml");
  ASSERT_EQ(approved.status, 200) << approved.body;

  // A node changes while the leader runs (our entry is rewritten), then the leader stops
  // (handing the Lease over) and the last node passes while no controller runs.
  SetValidation("a", "Fail");
  ASSERT_FALSE(WaitForWorkload("train", [&](const json& w) {
                 return CheckPendingWithMessage(w, "2/4");
               }).is_null());
  first.Stop();
  SetValidation("a", "Pass");
  SetValidation("x", "Pass");
  EXPECT_FALSE(IsTrue(WorkloadOf("train"), "Admitted"));

  StartController(Options(true, "second"));
  workload = WaitForWorkload("train", [&](const json& w) {
    return EntryOf(w, check_).value("state", "") == "Ready" && IsTrue(w, "Admitted");
  });
  ASSERT_FALSE(workload.is_null());
  const json manual = EntryOf(workload, manual_);
  EXPECT_EQ(manual.value("state", ""), "Ready");
  EXPECT_EQ(manual.value("message", ""), "approved by the test");
  // Our field manager owns our entry of status.admissionChecks and nothing else of it.
  for (const json& managed : workload["metadata"]["managedFields"]) {
    if (managed.value("manager", "") != "ncclguard-preflight") continue;
    const json checks =
        managed.value(json::json_pointer("/fieldsV1/f:status/f:admissionChecks"), json::object());
    for (const auto& [key, value] : checks.items()) {
      if (key == ".") continue;
      EXPECT_EQ(key, "k:{\"name\":\"" + check_ + "\"}");
    }
    const json status = managed.value(json::json_pointer("/fieldsV1/f:status"), json::object());
    for (const auto& [key, value] : status.items()) EXPECT_EQ(key, "f:admissionChecks");
  }
  const json resumed = Get(Jobs() + "/train");
  EXPECT_TRUE(Eventually(
      [&] { return !Get(Jobs() + "/train").value(json::json_pointer("/spec/suspend"), true); },
      kWait))
      << resumed.dump();
}

// Issue test 4: in the same cluster, a job without a queue label still goes through
// ncclguard's gate (marked pending, suspended, released once validated nodes exist), and
// Kueue leaves it alone.
TEST_F(KueueAdmissionCheck, AJobWithoutAQueueLabelIsStillGated) {
  MakeQueues(64, {check_});
  for (const char* n : {"a", "b", "c"}) AddNode(n, "Pass");
  AddNode("x", "Fail");
  StartController(Options());
  json unqueued = PyTorchJob("solo", 3, /*queued=*/false);
  for (auto& [role, spec] : unqueued["spec"]["pytorchReplicaSpecs"].items()) {
    spec["template"]["spec"]["nodeSelector"] = {
        {"node.kubernetes.io/instance-type", InstanceType()}};
  }
  Create(PyTorchJobs(), unqueued);
  const json marked = Get(PyTorchJobs() + "/solo");
  EXPECT_EQ(marked.value(json::json_pointer("/metadata/annotations/ncclguard.io~1gate"), ""),
            "pending");
  EXPECT_TRUE(marked.value(json::json_pointer("/spec/runPolicy/suspend"), false));
  // A queued job in the same namespace gets its Workload; the unqueued one never does.
  Create(PyTorchJobs(), PyTorchJob("queued", 3));
  ASSERT_FALSE(WaitForWorkload("queued", [](const json&) { return true; }).is_null());
  EXPECT_TRUE(WorkloadOf("solo").is_null());

  SetValidation("x", "Pass");
  json released;
  ASSERT_TRUE(Eventually(
      [&] {
        released = Get(PyTorchJobs() + "/solo");
        return released.value(json::json_pointer("/metadata/annotations/ncclguard.io~1gate"), "") ==
               "admitted";
      },
      kWait))
      << released.dump();
  EXPECT_FALSE(released.value(json::json_pointer("/spec/runPolicy/suspend"), true));
}

// Issue 26, test 3: a queued TrainJob on Trainer's torch-distributed runtime (2 nodes x 8 GPUs on
// p5.48xlarge): Kueue makes its Workload from the runtime, ncclguard's check holds it with the
// gate's message while one of the two nodes fails, Kueue keeps the TrainJob suspended (our gate
// never marks it), then the check is Ready once both pass and Kueue admits the Workload and
// unsuspends the TrainJob with the validated nodeSelector in its runtime patch.
TEST_F(KueueAdmissionCheck, QueuedTrainJobWaitsOnTheCheckThenKueueAdmitsIt) {
  UseFlavorFor("p5.48xlarge");
  MakeQueues(16, {check_});
  AddNode("a", "Pass");
  AddNode("x", "Fail");
  StartController(Options());
  // Kueue computes a TrainJob's pod sets from its runtime (even in its webhook): it exists first.
  const std::string runtime = namespace_ + "-torch-distributed";
  MakeTorchRuntime(runtime, "p5.48xlarge");
  Create(TrainJobs(), TrainJob("llama", runtime, 2));

  const std::string held = "1/2 p5.48xlarge nodes validated; node " + namespace_ +
                           "-x failed efa-device-count: 30 of 32 EFA devices";
  json workload =
      WaitForWorkload("llama", [&](const json& w) { return CheckPendingWithMessage(w, held); });
  ASSERT_FALSE(workload.is_null());
  EXPECT_NE(EntryOf(workload, check_).value("message", "").find("see https://"), std::string::npos);
  EXPECT_FALSE(IsTrue(workload, "Admitted"));
  // Kueue's pod set is the runtime's trainer job: 2 pods of 8 GPUs.
  const json pod_sets = workload.value(json::json_pointer("/spec/podSets"), json::array());
  ASSERT_EQ(pod_sets.size(), 1u) << workload.dump();
  EXPECT_EQ(pod_sets[0].value("name", ""), "node");
  EXPECT_EQ(pod_sets[0].value("count", 0), 2);
  // Suspended by Kueue, never marked by our gate; our webhook did see it (its fixes are in
  // ncclguard's runtime patch, beside Kueue's).
  const json held_job = Get(TrainJobs() + "/llama");
  EXPECT_TRUE(held_job.value(json::json_pointer("/spec/suspend"), false)) << held_job.dump();
  EXPECT_FALSE(held_job.contains(json::json_pointer("/metadata/annotations/ncclguard.io~1gate")));
  std::vector<std::string> managers;
  for (const json& patch :
       held_job.value(json::json_pointer("/spec/runtimePatches"), json::array())) {
    managers.push_back(patch.value("manager", ""));
  }
  std::sort(managers.begin(), managers.end());
  EXPECT_EQ(managers, (std::vector<std::string>{"kueue.x-k8s.io/manager", "ncclguard.io/webhook"}))
      << held_job.dump();

  SetValidation("x", "Pass");
  workload = WaitForWorkload("llama", [&](const json& w) {
    return EntryOf(w, check_).value("state", "") == "Ready" && IsTrue(w, "Admitted");
  });
  ASSERT_FALSE(workload.is_null());
  const json entry = EntryOf(workload, check_);
  EXPECT_EQ(entry.value("message", ""), "2 validated p5.48xlarge nodes for 2 needed");
  EXPECT_EQ(entry.value("podSetUpdates", json::array()),
            json::parse(R"([{"name":"node","nodeSelector":{"ncclguard.io/validated":"true"}}])"));

  // Kueue resumed it, the flavor's and our nodeSelector in its own runtime patch for "node".
  json resumed;
  ASSERT_TRUE(Eventually(
      [&] {
        resumed = Get(TrainJobs() + "/llama");
        return !resumed.value(json::json_pointer("/spec/suspend"), true);
      },
      kWait))
      << resumed.dump();
  EXPECT_FALSE(resumed.contains(json::json_pointer("/metadata/annotations/ncclguard.io~1gate")));
  json selector;
  for (const json& patch :
       resumed.value(json::json_pointer("/spec/runtimePatches"), json::array())) {
    if (patch.value("manager", "") != "kueue.x-k8s.io/manager") continue;
    for (const json& job :
         patch.value(json::json_pointer("/trainingRuntimeSpec/template/spec/replicatedJobs"),
                     json::array())) {
      if (job.value("name", "") != "node") continue;
      selector = job.value(json::json_pointer("/template/spec/template/spec/nodeSelector"),
                           json::object());
    }
  }
  EXPECT_EQ(selector.value("ncclguard.io/validated", ""), "true") << resumed.dump();
  EXPECT_EQ(selector.value("node.kubernetes.io/instance-type", ""), "p5.48xlarge")
      << resumed.dump();
}

// The block (topology.k8s.aws/network-node-layer-3) of each domain of a Workload's topology
// assignments, read at that level or, where Kueue names only the host, from the node's label.
std::set<std::string> AssignedBlocks(const json& workload,
                                     const std::map<std::string, std::string>& block_of_node) {
  std::set<std::string> blocks;
  for (const json& assignment :
       workload.value(json::json_pointer("/status/admission/podSetAssignments"), json::array())) {
    const json topology = assignment.value("topologyAssignment", json::object());
    const json levels = topology.value("levels", json::array());
    for (const json& slice : topology.value("slices", json::array())) {
      const int domains = slice.value("domainCount", 0);
      for (int d = 0; d < domains; ++d) {
        for (std::size_t l = 0; l < levels.size(); ++l) {
          const json values = slice["valuesPerLevel"][l];
          std::string value;
          if (values.contains("universal")) {
            value = values["universal"].get<std::string>();
          } else {
            const json individual = values["individual"];
            value = individual.value("prefix", "") +
                    individual["roots"][static_cast<std::size_t>(d)].get<std::string>() +
                    individual.value("suffix", "");
          }
          if (levels[l] == "topology.k8s.aws/network-node-layer-3") blocks.insert(value);
          if (levels[l] == "kubernetes.io/hostname") {
            const auto found = block_of_node.find(value);
            blocks.insert(found == block_of_node.end() ? "?" + value : found->second);
          }
        }
      }
    }
  }
  return blocks;
}

// Issue 51: Kueue's topology-aware scheduling on the EKS network layers. A Topology of
// network-node-layer-1..3 and the host, a flavor naming it, nodes in two layer-3 blocks (nn-a of
// 2 nodes, nn-b of 3; the nodes are written here, as a kubelet would report them, with 8 GPUs
// each). With --kueue-topology the in-process webhook asks Kueue for one layer-3 block on each
// queued job's pod templates: a PyTorchJob (Master and Workers grouped), a TrainJob (in
// ncclguard's runtime patch) and a batch Job; Kueue's TopologyAssignment puts each job's 3 pods in
// nn-b, the only block they fit. The batch Job's pods, made by the real Job controller and bound
// by the real kube-scheduler (scripts/kwok.sh start --without-kwok), give it NcclPlacement True
// OneBlock.
TEST_F(KueueAdmissionCheck, QueuedJobsOnATopologyFlavorAreAskedForOneBlockAndKueuePlacesThemInIt) {
  const std::map<std::string, std::string> scheduler_env{
      {"NCCLGUARD_CONTROLPLANE_DIR", ControlPlaneEnvironment::Info().state_dir}};
  const ProcessResult scheduler =
      RunProcess({SourceDir() + "/scripts/kwok.sh", "start", "--without-kwok"}, scheduler_env);
  ASSERT_EQ(scheduler.exit_code, 0) << scheduler.stderr_text;
  struct StopScheduler {
    std::map<std::string, std::string> env;
    ~StopScheduler() { RunProcess({SourceDir() + "/scripts/kwok.sh", "stop"}, env); }
  } stop_scheduler{scheduler_env};

  const std::string topology = namespace_ + "-eks";
  Create("/apis/kueue.x-k8s.io/v1beta2/topologies",
         {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
          {"kind", "Topology"},
          {"metadata", {{"name", topology}}},
          {"spec",
           {{"levels", json::array({{{"nodeLabel", "topology.k8s.aws/network-node-layer-1"}},
                                    {{"nodeLabel", "topology.k8s.aws/network-node-layer-2"}},
                                    {{"nodeLabel", "topology.k8s.aws/network-node-layer-3"}},
                                    {{"nodeLabel", "kubernetes.io/hostname"}}})}}}});
  cleanup_.push_back("/apis/kueue.x-k8s.io/v1beta2/topologies/" + topology);
  flavor_ = namespace_ + "-tas";
  Create("/apis/kueue.x-k8s.io/v1beta2/resourceflavors",
         {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
          {"kind", "ResourceFlavor"},
          {"metadata", {{"name", flavor_}}},
          {"spec",
           {{"nodeLabels", {{"node.kubernetes.io/instance-type", InstanceType()}}},
            {"topologyName", topology}}}});
  cleanup_.push_back("/apis/kueue.x-k8s.io/v1beta2/resourceflavors/" + flavor_);
  MakeQueues(64, {});

  std::map<std::string, std::string> block_of_node;
  for (const auto& [name, block] : std::vector<std::pair<std::string, std::string>>{
           {"a1", "nn-a"}, {"a2", "nn-a"}, {"b1", "nn-b"}, {"b2", "nn-b"}, {"b3", "nn-b"}}) {
    const std::string node = namespace_ + "-" + name;
    nodes_.push_back(node);
    block_of_node[node] = block;
    Create("/api/v1/nodes", {{"apiVersion", "v1"},
                             {"kind", "Node"},
                             {"metadata",
                              {{"name", node},
                               {"labels",
                                {{"node.kubernetes.io/instance-type", InstanceType()},
                                 {"kubernetes.io/hostname", node},
                                 {"topology.k8s.aws/network-node-layer-1", "nn-1"},
                                 {"topology.k8s.aws/network-node-layer-2", "nn-2"},
                                 {"topology.k8s.aws/network-node-layer-3", block}}}}}});
    const KubeResponse status = client_->Request(
        "PATCH", "/api/v1/nodes/" + node + "/status",
        json{{"status",
              {{"capacity",
                {{"cpu", "96"}, {"memory", "1000Gi"}, {"nvidia.com/gpu", "8"}, {"pods", "110"}}},
               {"allocatable",
                {{"cpu", "96"}, {"memory", "1000Gi"}, {"nvidia.com/gpu", "8"}, {"pods", "110"}}},
               {"conditions", json::array({{{"type", "Ready"},
                                            {"status", "True"},
                                            {"reason", "KubeletReady"},
                                            {"lastHeartbeatTime", "2026-12-08T00:00:00Z"},
                                            {"lastTransitionTime", "2026-12-08T00:00:00Z"}}})}}}}
            .dump(),
        "application/merge-patch+json");
    ASSERT_EQ(status.status, 200) << status.body;
    // Ready: the not-ready taint the API server put on the new node goes, as the node lifecycle
    // controller would take it off.
    const KubeResponse untainted =
        client_->Request("PATCH", "/api/v1/nodes/" + node, R"({"spec":{"taints":null}})",
                         "application/merge-patch+json");
    ASSERT_EQ(untainted.status, 200) << untainted.body;
  }

  manager::ManagerOptions options = Options();
  options.enable.insert("kueue-topology");
  options.placement_ready = [](core::PlacementLookup lookup) {
    shared->webhook->server().UsePlacement(std::move(lookup));
  };
  StartController(std::move(options));
  // The webhook knows the queue's Topology once the controller's caches hold it: a dry run of a
  // queued Job comes back with the request.
  const std::string kAnnotation = "kueue.x-k8s.io/podset-preferred-topology";
  const std::string kBlock = "topology.k8s.aws/network-node-layer-3";
  json dry_run;
  ASSERT_TRUE(Eventually(
      [&] {
        const KubeResponse r = client_->Post(Jobs() + "?dryRun=All", BatchJob("dry", 3));
        dry_run = r.status == 201 ? r.Json() : json(nullptr);
        return !dry_run.is_null() &&
               dry_run.value(json::json_pointer("/spec/template/metadata/annotations"),
                             json::object())
                       .value(kAnnotation, "") == kBlock;
      },
      kWait, 200ms))
      << dry_run.dump();

  // The PyTorchJob: both pod sets asked for one block, grouped; Kueue places all 3 pods in nn-b.
  Create(PyTorchJobs(), PyTorchJob("torch", 2));
  const json torch = Get(PyTorchJobs() + "/torch");
  for (const char* role : {"Master", "Worker"}) {
    const json annotations =
        torch.value(json::json_pointer(std::string("/spec/pytorchReplicaSpecs/") + role +
                                       "/template/metadata/annotations"),
                    json::object());
    EXPECT_EQ(annotations.value(kAnnotation, ""), kBlock) << role << torch.dump();
    EXPECT_EQ(annotations.value("kueue.x-k8s.io/podset-group-name", ""), "ncclguard-ranks") << role;
  }
  json workload = WaitForWorkload("torch", [](const json& w) { return IsTrue(w, "Admitted"); });
  ASSERT_FALSE(workload.is_null());
  EXPECT_EQ(AssignedBlocks(workload, block_of_node), std::set<std::string>{"nn-b"})
      << workload.dump();
  client_->Delete(PyTorchJobs() + "/torch");
  ASSERT_TRUE(Eventually([&] { return WorkloadOf("torch").is_null(); }, kWait));

  // The TrainJob: the request in ncclguard's runtime patch for the trainer's job "node".
  const std::string runtime = namespace_ + "-torch-distributed";
  MakeTorchRuntime(runtime, InstanceType());
  Create(TrainJobs(), TrainJob("llama", runtime, 3));
  const json trainjob = Get(TrainJobs() + "/llama");
  std::string asked;
  for (const json& patch :
       trainjob.value(json::json_pointer("/spec/runtimePatches"), json::array())) {
    if (patch.value("manager", "") != "ncclguard.io/webhook") continue;
    for (const json& job :
         patch.value(json::json_pointer("/trainingRuntimeSpec/template/spec/replicatedJobs"),
                     json::array())) {
      asked = job.value(json::json_pointer("/template/spec/template/metadata/annotations"),
                        json::object())
                  .value(kAnnotation, "");
    }
  }
  EXPECT_EQ(asked, kBlock) << trainjob.dump();
  workload = WaitForWorkload("llama", [](const json& w) { return IsTrue(w, "Admitted"); });
  ASSERT_FALSE(workload.is_null());
  EXPECT_EQ(AssignedBlocks(workload, block_of_node), std::set<std::string>{"nn-b"})
      << workload.dump();
  client_->Delete(TrainJobs() + "/llama");
  ASSERT_TRUE(Eventually([&] { return WorkloadOf("llama").is_null(); }, kWait));

  // The batch Job: its pods run nowhere (no kubelet) but are bound, all in nn-b.
  Create(Jobs(), BatchJob("bound", 3));
  workload = WaitForWorkload("bound", [](const json& w) { return IsTrue(w, "Admitted"); });
  ASSERT_FALSE(workload.is_null());
  EXPECT_EQ(AssignedBlocks(workload, block_of_node), std::set<std::string>{"nn-b"})
      << workload.dump();
  json placed;
  ASSERT_TRUE(Eventually(
      [&] {
        placed = ConditionOf(Get(Jobs() + "/bound"), "NcclPlacement");
        return placed.value("reason", "") == "OneBlock";
      },
      kWait, 200ms))
      << placed.dump() << "\n"
      << Get("/api/v1/namespaces/" + namespace_ + "/pods").dump();
  EXPECT_EQ(placed.value("status", ""), "True");
  EXPECT_NE(placed.value("message", "").find("nn-b"), std::string::npos) << placed.dump();
}

}  // namespace
}  // namespace ncclguard::testenv
