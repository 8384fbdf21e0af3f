// The training-job reconciler's actions against the real kube-apiserver: the Service, status
// patches with our conditions, the release patch and the Events it returns are accepted for every
// kind; reconciling the state the server stored returns nothing more; pod failures written
// through the status subresource are diagnosed. The CRDs in crds/ accept valid objects and
// reject invalid ones.
#include <gtest/gtest.h>

#include <memory>
#include <variant>

#include "controllers/policy_object.h"
#include "controllers/training_job_reconciler.h"
#include "controlplane_env.h"
#include "core/errors.h"
#include "manifests.h"
#include "test_kube_client.h"

namespace ncclguard::testenv {
namespace {

using controllers::Action;
using controllers::JobKey;
using core::Json;
using core::WorkloadKind;

Json ToCore(const nlohmann::json& j) { return Json::parse(j.dump()); }
nlohmann::json FromCore(const Json& j) { return nlohmann::json::parse(j.dump()); }

std::string Encode(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '=') {
      out += "%3D";
    } else if (c == ',') {
      out += "%2C";
    } else {
      out += c;
    }
  }
  return out;
}

controllers::Timestamp Now() {
  return std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
}

// A ClusterView that reads the API server directly (the product reads informer caches).
class ApiServerView : public controllers::ClusterView {
 public:
  explicit ApiServerView(TestKubeClient& client) : client_(client) {}

  std::optional<Json> Job(const JobKey& key) const override {
    const auto& info = core::KindInfoOf(key.kind);
    const core::ObjectRef ref{.api_version = std::string(info.api_version),
                              .kind = std::string(info.kind_name),
                              .namespace_ = key.namespace_,
                              .name = key.name,
                              .uid = "",
                              .resource = std::string(info.resource)};
    return GetObject(controllers::RestPath(ref));
  }
  std::vector<Json> PodsWithLabel(std::string_view ns, std::string_view key,
                                  std::string_view value) const override {
    return List("/api/v1/namespaces/" + std::string(ns) +
                "/pods?labelSelector=" + Encode(std::string(key) + "=" + std::string(value)));
  }
  std::optional<Json> Service(std::string_view ns, std::string_view name) const override {
    return GetObject("/api/v1/namespaces/" + std::string(ns) + "/services/" + std::string(name));
  }
  std::vector<Json> NodesWithLabel(std::string_view key, std::string_view value) const override {
    return List("/api/v1/nodes?labelSelector=" +
                Encode(std::string(key) + "=" + std::string(value)));
  }
  std::optional<Json> NodeValidation(std::string_view node) const override {
    return GetObject("/apis/ncclguard.io/v1alpha1/nodevalidations/" + std::string(node));
  }
  std::optional<Json> Namespace(std::string_view name) const override {
    return GetObject("/api/v1/namespaces/" + std::string(name));
  }
  std::vector<Json> EventsAbout(std::string_view ns, std::string_view kind,
                                std::string_view name) const override {
    // Events recorded through events.k8s.io/v1 read back through core/v1 (note -> message).
    return List("/api/v1/namespaces/" + std::string(ns) + "/events?fieldSelector=" +
                Encode("involvedObject.kind=" + std::string(kind) +
                       ",involvedObject.name=" + std::string(name)));
  }
  const core::Policy& Policy() const override { return policy_; }
  core::Policy& policy() { return policy_; }

 private:
  std::optional<Json> GetObject(const std::string& path) const {
    const KubeResponse r = client_.Get(path);
    if (r.status == 404) return std::nullopt;
    EXPECT_EQ(r.status, 200) << path << ": " << r.error << r.body;
    if (r.status != 200) return std::nullopt;
    return Json::parse(r.body);
  }
  std::vector<Json> List(const std::string& path) const {
    const KubeResponse r = client_.Get(path);
    EXPECT_EQ(r.status, 200) << path << ": " << r.error << r.body;
    std::vector<Json> items;
    if (r.status != 200) return items;
    const Json list = Json::parse(r.body);  // named: a range over a temporary's member dangles
    for (const Json& item : list["items"]) items.push_back(item);
    return items;
  }

  TestKubeClient& client_;
  core::Policy policy_ = core::Policy::Defaults();
};

class OperatorAgainstApiServer : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = std::make_unique<TestKubeClient>(ControlPlaneEnvironment::Info());
    for (const char* kind : {"PyTorchJob", "MPIJob", "JobSet"}) {
      ApplyCrds(*client_, JobCrd(kind));
    }
    ApplyCrds(*client_, SourceDir() + "/crds/nodevalidation.yaml");
    ApplyCrds(*client_, SourceDir() + "/crds/ncclpolicy.yaml");
    namespace_ = CreateTestNamespace(*client_, "op", {{"ncclguard.io/enabled", "true"}});
    view_ = std::make_unique<ApiServerView>(*client_);
  }
  void TearDown() override {
    if (client_ && !namespace_.empty()) client_->Delete("/api/v1/namespaces/" + namespace_);
    for (const std::string& node : nodes_) {
      client_->Delete("/api/v1/nodes/" + node);
      client_->Delete("/apis/ncclguard.io/v1alpha1/nodevalidations/" + node);
    }
  }

  // Applies the actions as the product's executor will; every one must be accepted.
  void Apply(const std::vector<Action>& actions) {
    controllers::PatchVersions versions;  // the release names the version the status patch made
    for (const Action& action : actions) {
      if (const auto* create = std::get_if<controllers::CreateObject>(&action)) {
        const KubeResponse r =
            client_->Post(controllers::RestPath(create->target, true), FromCore(create->object));
        EXPECT_EQ(r.status, 201) << r.body;
      } else if (const auto* patch = std::get_if<controllers::MergePatch>(&action)) {
        const Json body = versions.Resolve(*patch);
        const KubeResponse r = client_->Request(
            "PATCH", controllers::RestPath(patch->target, false, patch->status_subresource),
            body.dump(), "application/merge-patch+json");
        EXPECT_EQ(r.status, 200) << body.dump() << "\n" << r.body;
        if (r.status == 200) {
          versions.Wrote(*patch, Json::parse(r.body)["metadata"].value("resourceVersion", ""));
        }
      } else if (const auto* event = std::get_if<controllers::RecordEvent>(&action)) {
        const Json body =
            controllers::EventObject(*event, "test-instance", controllers::FormatMicroTime(Now()));
        const KubeResponse r = client_->Post(
            "/apis/events.k8s.io/v1/namespaces/" + event->regarding.namespace_ + "/events",
            FromCore(body));
        EXPECT_EQ(r.status, 201) << body.dump() << "\n" << r.body;
      }
    }
  }

  // Reconciles and applies until a reconcile returns nothing; fails if it never settles.
  controllers::ReconcileResult Settle(const JobKey& key) {
    controllers::ReconcileResult last;
    for (int round = 0; round < 4; ++round) {
      last = controllers::ReconcileTrainingJob(key, *view_, Now());
      if (last.actions.empty()) return last;
      Apply(last.actions);
    }
    ADD_FAILURE() << key.ToString() << " did not settle";
    return last;
  }

  void AddNode(const std::string& name, const std::string& summary) {
    const std::string unique = namespace_ + "-" + name;
    nodes_.push_back(unique);
    const KubeResponse node = client_->Post(
        "/api/v1/nodes",
        {{"apiVersion", "v1"},
         {"kind", "Node"},
         {"metadata",
          {{"name", unique}, {"labels", {{"node.kubernetes.io/instance-type", InstanceType()}}}}}});
    ASSERT_EQ(node.status, 201) << node.body;
    const KubeResponse nv = client_->Post("/apis/ncclguard.io/v1alpha1/nodevalidations",
                                          {{"apiVersion", "ncclguard.io/v1alpha1"},
                                           {"kind", "NodeValidation"},
                                           {"metadata", {{"name", unique}}}});
    ASSERT_EQ(nv.status, 201) << nv.body;
    nlohmann::json checks = nlohmann::json::array();
    if (summary == "Fail") {
      checks.push_back({{"id", "efa-device-count"},
                        {"status", "Fail"},
                        {"observed", "30"},
                        {"expected", "32"},
                        {"message", "30 of 32 EFA devices"}});
    }
    const KubeResponse status = client_->Request(
        "PATCH", "/apis/ncclguard.io/v1alpha1/nodevalidations/" + unique + "/status",
        nlohmann::json{{"status",
                        {{"instanceType", InstanceType()},
                         {"summary", summary},
                         {"lastProbeTime", "2026-12-02T14:00:00Z"},
                         {"probeVersion", "test"},
                         {"checks", checks}}}}
            .dump(),
        "application/merge-patch+json");
    ASSERT_EQ(status.status, 200) << status.body;
  }

  // Each test namespace gets its own (fictional) instance type, so node counts do not mix.
  std::string InstanceType() const { return namespace_ + ".48xlarge"; }

  nlohmann::json PodTemplate() const {
    return {{"spec",
             {{"nodeSelector", {{"node.kubernetes.io/instance-type", InstanceType()}}},
              {"containers",
               {{{"name", "pytorch"},
                 {"image", "registry.invalid/trainer:1"},
                 {"resources", {{"limits", {{"nvidia.com/gpu", 8}}}}}}}}}}};
  }

  nlohmann::json GatedPyTorchJob(const std::string& name, int workers) const {
    return {{"apiVersion", "kubeflow.org/v1"},
            {"kind", "PyTorchJob"},
            {"metadata", {{"name", name}, {"annotations", {{"ncclguard.io/gate", "pending"}}}}},
            {"spec",
             {{"runPolicy", {{"suspend", true}}},
              {"pytorchReplicaSpecs",
               {{"Master", {{"replicas", 1}, {"template", PodTemplate()}}},
                {"Worker", {{"replicas", workers}, {"template", PodTemplate()}}}}}}}};
  }

  // Two replicas of one 8-GPU pod each, marked by the gate.
  nlohmann::json GatedJobSet(const std::string& name) const {
    return {{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
            {"kind", "JobSet"},
            {"metadata", {{"name", name}, {"annotations", {{"ncclguard.io/gate", "pending"}}}}},
            {"spec",
             {{"suspend", true},
              {"replicatedJobs",
               {{{"name", "workers"},
                 {"replicas", 2},
                 {"template", {{"spec", {{"parallelism", 1}, {"template", PodTemplate()}}}}}}}}}}};
  }

  nlohmann::json Get(const std::string& path) {
    const KubeResponse r = client_->Get(path);
    EXPECT_EQ(r.status, 200) << path << r.body;
    return r.status == 200 ? r.Json() : nlohmann::json::object();
  }

  static nlohmann::json ConditionOf(const nlohmann::json& job, const std::string& type) {
    for (const auto& c :
         job.value(nlohmann::json::json_pointer("/status/conditions"), nlohmann::json::array())) {
      if (c.value("type", "") == type) return c;
    }
    return nullptr;
  }

  std::unique_ptr<TestKubeClient> client_;
  std::unique_ptr<ApiServerView> view_;
  std::string namespace_;
  std::vector<std::string> nodes_;
};

TEST_F(OperatorAgainstApiServer, GatedPyTorchJobIsHeldThenReleased) {
  const std::string jobs = "/apis/kubeflow.org/v1/namespaces/" + namespace_ + "/pytorchjobs";
  ASSERT_EQ(client_->Post(jobs, GatedPyTorchJob("llama", 2)).status, 201);
  AddNode("a", "Pass");
  AddNode("b", "Pass");
  AddNode("c", "Fail");
  const JobKey key{WorkloadKind::PyTorchJob, namespace_, "llama"};

  const auto held = Settle(key);
  ASSERT_TRUE(held.requeue_after);
  nlohmann::json job = Get(jobs + "/llama");
  EXPECT_EQ(job["spec"]["runPolicy"]["suspend"], true);
  const auto preflight = ConditionOf(job, "NcclPreflight");
  EXPECT_EQ(preflight["status"], "False");
  EXPECT_EQ(preflight["reason"], "InsufficientValidatedNodes");
  EXPECT_EQ(preflight["message"].get<std::string>().rfind(
                "2/3 " + InstanceType() + " nodes validated; node " + namespace_ +
                    "-c failed efa-device-count: 30 of 32 EFA devices",
                0),
            0u)
      << preflight;

  const nlohmann::json service = Get("/api/v1/namespaces/" + namespace_ + "/services/llama");
  EXPECT_EQ(service["spec"]["clusterIP"], "None");
  EXPECT_EQ(service["spec"]["publishNotReadyAddresses"], true);
  EXPECT_EQ(service["metadata"]["ownerReferences"][0]["uid"], job["metadata"]["uid"]);
  EXPECT_EQ(service["metadata"]["annotations"]["ncclguard.io/master-addr"],
            "llama-master-0.llama." + namespace_ + ".svc.cluster.local");

  const nlohmann::json events = Get("/apis/events.k8s.io/v1/namespaces/" + namespace_ + "/events");
  bool warned = false;
  for (const auto& e : events["items"]) {
    if (e["reason"] == "InsufficientValidatedNodes" && e["regarding"]["name"] == "llama") {
      warned = true;
      EXPECT_EQ(e["metadata"]["annotations"]["ncclguard.io/diagnosis"],
                "insufficient-validated-nodes");
      EXPECT_EQ(e["note"].get<std::string>().rfind("insufficient-validated-nodes: ", 0), 0u) << e;
    }
  }
  EXPECT_TRUE(warned) << events.dump();
  const auto diagnosis = ConditionOf(job, "NcclDiagnosis");
  EXPECT_EQ(diagnosis["reason"], "InsufficientValidatedNodes");
  EXPECT_EQ(diagnosis["message"].get<std::string>().rfind("insufficient-validated-nodes: ", 0), 0u)
      << diagnosis;

  AddNode("d", "Warn");
  const auto released = Settle(key);
  EXPECT_FALSE(released.requeue_after);
  job = Get(jobs + "/llama");
  EXPECT_EQ(job["spec"]["runPolicy"]["suspend"], false);
  EXPECT_EQ(job["metadata"]["annotations"]["ncclguard.io/gate"], "admitted");
  EXPECT_EQ(ConditionOf(job, "NcclPreflight")["status"], "True");
  EXPECT_EQ(ConditionOf(job, "NcclDiagnosis")["status"], "False");
}

// Audit mode (docs/operator.md "Audit mode"): the webhook leaves jobs in a namespace labelled
// ncclguard.io/mode=audit unmarked; the controller holds nothing and says, in a condition and an
// Event the API server accepts (the JobSet's schema included), what it would have held.
TEST_F(OperatorAgainstApiServer, AJobInAnAuditNamespaceIsNotHeldAndToldWhatWouldHaveHeldIt) {
  const nlohmann::json label = {{"metadata", {{"labels", {{"ncclguard.io/mode", "audit"}}}}}};
  ASSERT_EQ(client_
                ->Request("PATCH", "/api/v1/namespaces/" + namespace_, label.dump(),
                          "application/merge-patch+json")
                .status,
            200);
  AddNode("a", "Pass");
  AddNode("c", "Fail");
  const std::string pytorchjobs = "/apis/kubeflow.org/v1/namespaces/" + namespace_ + "/pytorchjobs";
  const std::string jobsets =
      "/apis/jobset.x-k8s.io/v1alpha2/namespaces/" + namespace_ + "/jobsets";
  // As the audit webhook admits them: no gate mark, not suspended.
  nlohmann::json pytorchjob = GatedPyTorchJob("llama", 2);
  pytorchjob["metadata"].erase("annotations");
  pytorchjob["spec"].erase("runPolicy");
  nlohmann::json jobset = GatedJobSet("sets");
  jobset["metadata"].erase("annotations");
  jobset["spec"]["suspend"] = false;
  ASSERT_EQ(client_->Post(pytorchjobs, pytorchjob).status, 201);
  ASSERT_EQ(client_->Post(jobsets, jobset).status, 201);

  for (const auto& [key, path] :
       {std::pair{JobKey{WorkloadKind::PyTorchJob, namespace_, "llama"}, pytorchjobs + "/llama"},
        std::pair{JobKey{WorkloadKind::JobSet, namespace_, "sets"}, jobsets + "/sets"}}) {
    const auto settled = Settle(key);
    EXPECT_FALSE(settled.requeue_after) << "nothing is held: nothing to wait for";
    const nlohmann::json job = Get(path);
    EXPECT_FALSE(job["metadata"].contains("annotations") &&
                 job["metadata"]["annotations"].contains("ncclguard.io/gate"))
        << job.dump();
    if (key.kind == WorkloadKind::JobSet) {
      EXPECT_EQ(job["spec"]["suspend"], false);
    } else {
      EXPECT_FALSE(job["spec"].contains("runPolicy")) << job.dump();
    }
    const auto preflight = ConditionOf(job, "NcclPreflight");
    EXPECT_EQ(preflight["status"], "False") << job.dump();
    EXPECT_EQ(preflight["reason"], "WouldHold");
    EXPECT_EQ(preflight["message"].get<std::string>().rfind(
                  "audit mode: ncclguard would hold this job until enough validated nodes exist, "
                  "and did not: 1/",
                  0),
              0u)
        << preflight;
  }
  const nlohmann::json events = Get("/apis/events.k8s.io/v1/namespaces/" + namespace_ + "/events");
  int would_hold = 0;
  for (const auto& e : events["items"]) would_hold += e["reason"] == "WouldHold" ? 1 : 0;
  EXPECT_EQ(would_hold, 2) << events.dump();
}

TEST_F(OperatorAgainstApiServer, BatchJobAcceptsOurConditionsAndRelease) {
  const std::string jobs = "/apis/batch/v1/namespaces/" + namespace_ + "/jobs";
  nlohmann::json job{{"apiVersion", "batch/v1"},
                     {"kind", "Job"},
                     {"metadata",
                      {{"name", "train"},
                       {"labels", {{"ncclguard.io/managed", "true"}}},
                       {"annotations", {{"ncclguard.io/gate", "pending"}}}}},
                     {"spec",
                      {{"suspend", true},
                       {"completionMode", "Indexed"},
                       {"completions", 2},
                       {"parallelism", 2},
                       {"template", PodTemplate()}}}};
  job["spec"]["template"]["spec"]["restartPolicy"] = "Never";
  ASSERT_EQ(client_->Post(jobs, job).status, 201);
  const JobKey key{WorkloadKind::BatchJob, namespace_, "train"};
  Settle(key);
  EXPECT_EQ(ConditionOf(Get(jobs + "/train"), "NcclPreflight")["reason"],
            "InsufficientValidatedNodes");

  view_->policy().gate.enabled = false;
  Settle(key);
  const nlohmann::json stored = Get(jobs + "/train");
  EXPECT_EQ(stored["spec"]["suspend"], false);
  EXPECT_EQ(ConditionOf(stored, "NcclPreflight")["status"], "True");
  EXPECT_EQ(ConditionOf(stored, "NcclPreflight")["reason"], "GateDisabled");
  EXPECT_EQ(Get("/api/v1/namespaces/" + namespace_ +
                "/services/train")["spec"]["selector"]["batch.kubernetes.io/job-name"],
            "train");
}

TEST_F(OperatorAgainstApiServer, MpiJobAndJobSetAreReleasedThroughTheirSuspendFields) {
  const std::string mpijobs = "/apis/kubeflow.org/v2beta1/namespaces/" + namespace_ + "/mpijobs";
  const std::string jobsets =
      "/apis/jobset.x-k8s.io/v1alpha2/namespaces/" + namespace_ + "/jobsets";
  const nlohmann::json pending = {{"ncclguard.io/gate", "pending"}};
  ASSERT_EQ(
      client_
          ->Post(mpijobs, {{"apiVersion", "kubeflow.org/v2beta1"},
                           {"kind", "MPIJob"},
                           {"metadata", {{"name", "bert"}, {"annotations", pending}}},
                           {"spec",
                            {{"slotsPerWorker", 8},
                             {"runPolicy", {{"suspend", true}}},
                             {"mpiReplicaSpecs",
                              {{"Launcher",
                                {{"replicas", 1},
                                 {"template",
                                  {{"spec",
                                    {{"containers",
                                      {{{"name", "l"}, {"image", "registry.invalid/mpi:1"}}}}}}}}}},
                               {"Worker", {{"replicas", 2}, {"template", PodTemplate()}}}}}}}})
          .status,
      201);
  ASSERT_EQ(client_->Post(jobsets, GatedJobSet("js")).status, 201);
  AddNode("a", "Pass");
  AddNode("b", "Pass");
  const JobKey mpi{WorkloadKind::MpiJob, namespace_, "bert"};
  const JobKey js{WorkloadKind::JobSet, namespace_, "js"};
  Settle(mpi);
  Settle(js);
  const nlohmann::json bert = Get(mpijobs + "/bert");
  EXPECT_EQ(bert["spec"]["runPolicy"]["suspend"], false);  // 2 workers x 8 GPUs on 2 nodes
  EXPECT_EQ(ConditionOf(bert, "NcclPreflight")["reason"], "ValidatedNodesAvailable");
  EXPECT_EQ(client_->Get("/api/v1/namespaces/" + namespace_ + "/services/bert").status, 404)
      << "the mpi-operator makes the MPIJob's Service";
  const nlohmann::json jobset = Get(jobsets + "/js");
  EXPECT_EQ(jobset["spec"]["suspend"], false);
  EXPECT_EQ(jobset["metadata"]["annotations"]["ncclguard.io/gate"], "admitted");
  const auto preflight = ConditionOf(jobset, "NcclPreflight");
  EXPECT_EQ(preflight["status"], "True");
  EXPECT_FALSE(preflight.contains("lastUpdateTime"));  // metav1.Condition shape
}

// The JobSet CRD validates status.conditions as upstream does: the held JobSet's NcclDiagnosis
// condition (reason InsufficientValidatedNodes) is accepted, and the same condition with the
// kebab-case id as its reason, as ncclguard once wrote it, is rejected by the API server.
TEST_F(OperatorAgainstApiServer, JobSetDiagnosisConditionPassesTheUpstreamSchema) {
  const std::string jobsets =
      "/apis/jobset.x-k8s.io/v1alpha2/namespaces/" + namespace_ + "/jobsets";
  ASSERT_EQ(client_->Post(jobsets, GatedJobSet("held")).status, 201);
  AddNode("a", "Pass");
  AddNode("b", "Fail");
  Settle({WorkloadKind::JobSet, namespace_, "held"});  // every status write must be accepted
  const nlohmann::json held = Get(jobsets + "/held");
  EXPECT_EQ(held["spec"]["suspend"], true);
  const auto diagnosis = ConditionOf(held, "NcclDiagnosis");
  EXPECT_EQ(diagnosis["status"], "True");
  EXPECT_EQ(diagnosis["reason"], "InsufficientValidatedNodes");
  EXPECT_EQ(diagnosis["message"].get<std::string>().rfind("insufficient-validated-nodes: ", 0), 0u)
      << diagnosis;

  nlohmann::json kebab = diagnosis;
  kebab["reason"] = "insufficient-validated-nodes";
  const KubeResponse rejected = client_->Request(
      "PATCH", jobsets + "/held/status",
      nlohmann::json{{"status", {{"conditions", nlohmann::json::array({kebab})}}}}.dump(),
      "application/merge-patch+json");
  EXPECT_EQ(rejected.status, 422) << rejected.body;
  EXPECT_NE(rejected.body.find("reason"), std::string::npos) << rejected.body;
  EXPECT_EQ(ConditionOf(Get(jobsets + "/held"), "NcclDiagnosis")["reason"],
            "InsufficientValidatedNodes");
}

TEST_F(OperatorAgainstApiServer, PodFailuresThroughTheStatusSubresourceAreDiagnosed) {
  const std::string jobs = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/" + namespace_ + "/jobsets";
  nlohmann::json jobset{
      {"apiVersion", "jobset.x-k8s.io/v1alpha2"},
      {"kind", "JobSet"},
      {"metadata", {{"name", "js"}}},
      {"spec",
       {{"replicatedJobs",
         {{{"name", "workers"},
           {"replicas", 1},
           {"template", {{"spec", {{"parallelism", 1}, {"template", PodTemplate()}}}}}}}}}}};
  ASSERT_EQ(client_->Post(jobs, jobset).status, 201);
  const std::string pods = "/api/v1/namespaces/" + namespace_ + "/pods";
  nlohmann::json pod{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", "js-workers-0-0"}, {"labels", {{"jobset.sigs.k8s.io/jobset-name", "js"}}}}},
      {"spec", PodTemplate()["spec"]}};
  pod["spec"].erase("nodeSelector");
  ASSERT_EQ(client_->Post(pods, pod).status, 201);
  const KubeResponse status = client_->Request(
      "PATCH", pods + "/js-workers-0-0/status",
      nlohmann::json{{"status",
                      {{"phase", "Failed"},
                       {"containerStatuses",
                        {{{"name", "pytorch"},
                          {"image", "registry.invalid/trainer:1"},
                          {"imageID", ""},
                          {"ready", false},
                          {"restartCount", 0},
                          {"state",
                           {{"terminated",
                             {{"exitCode", 1},
                              {"reason", "Error"},
                              {"message", "torch.OutOfMemoryError: CUDA out of memory."}}}}}}}}}}}
          .dump(),
      "application/merge-patch+json");
  ASSERT_EQ(status.status, 200) << status.body;

  Settle({WorkloadKind::JobSet, namespace_, "js"});
  const auto diagnosis = ConditionOf(Get(jobs + "/js"), "NcclDiagnosis");
  EXPECT_EQ(diagnosis["status"], "True");
  EXPECT_EQ(diagnosis["reason"], "GPUOOM");  // metav1.Condition reasons have no '-'
  EXPECT_EQ(diagnosis["message"].get<std::string>().rfind("gpu-oom: ", 0), 0u) << diagnosis;
  EXPECT_NE(diagnosis["message"].get<std::string>().find("#gpu-oom"), std::string::npos);
  const nlohmann::json events =
      Get("/api/v1/namespaces/" + namespace_ + "/events?fieldSelector=reason%3DGPUOOM");
  ASSERT_EQ(events["items"].size(), 1u) << events.dump();
  EXPECT_EQ(events["items"][0]["involvedObject"]["name"], "js");
  EXPECT_EQ(events["items"][0]["metadata"]["annotations"]["ncclguard.io/diagnosis"], "gpu-oom");
}

TEST_F(OperatorAgainstApiServer, AStaleStatusPatchConflictsInsteadOfOverwriting) {
  const std::string jobs = "/apis/kubeflow.org/v1/namespaces/" + namespace_ + "/pytorchjobs";
  ASSERT_EQ(client_->Post(jobs, GatedPyTorchJob("race", 1)).status, 201);
  const JobKey key{WorkloadKind::PyTorchJob, namespace_, "race"};
  const auto result = controllers::ReconcileTrainingJob(key, *view_, Now());
  // The training operator writes the job in between.
  ASSERT_EQ(client_
                ->Request("PATCH", jobs + "/race/status",
                          R"({"status":{"conditions":[{"type":"Created","status":"True"}]}})",
                          "application/merge-patch+json")
                .status,
            200);
  for (const Action& action : result.actions) {
    const auto* patch = std::get_if<controllers::MergePatch>(&action);
    if (patch == nullptr || !patch->status_subresource) continue;
    const KubeResponse r =
        client_->Request("PATCH", controllers::RestPath(patch->target, false, true),
                         patch->patch.dump(), "application/merge-patch+json");
    EXPECT_EQ(r.status, 409) << r.body;
  }
  Settle(key);
  const nlohmann::json job = Get(jobs + "/race");
  EXPECT_EQ(ConditionOf(job, "Created")["status"], "True");  // theirs kept
  EXPECT_EQ(ConditionOf(job, "NcclPreflight")["status"], "False");
}

TEST_F(OperatorAgainstApiServer, NodeValidationSchema) {
  const std::string path = "/apis/ncclguard.io/v1alpha1/nodevalidations";
  const std::string name = namespace_ + "-nv";
  nodes_.push_back(name);
  ASSERT_EQ(client_
                ->Post(path, {{"apiVersion", "ncclguard.io/v1alpha1"},
                              {"kind", "NodeValidation"},
                              {"metadata", {{"name", name}}}})
                .status,
            201);
  auto patch_status = [&](const nlohmann::json& status) {
    return client_
        ->Request("PATCH", path + "/" + name + "/status", nlohmann::json{{"status", status}}.dump(),
                  "application/merge-patch+json")
        .status;
  };
  nlohmann::json check{{"id", "removeipc"},
                       {"status", "Warn"},
                       {"observed", "RemoveIPC=yes"},
                       {"expected", "RemoveIPC=no"},
                       {"message", "systemd-logind removes IPC objects"},
                       {"guide", "https://x.example/guide.md#stale-shm"},
                       {"suggestedCommand", "sed -i ... /etc/systemd/logind.conf"},
                       {"blastRadius", "restarts systemd-logind"}};
  nlohmann::json valid{{"instanceType", "p5.48xlarge"},
                       {"summary", "Warn"},
                       {"lastProbeTime", "2026-12-02T14:00:00Z"},
                       {"probeVersion", "0.1.0"}};
  valid["checks"] = nlohmann::json::array({check});
  EXPECT_EQ(patch_status(valid), 200);
  EXPECT_EQ(patch_status({{"summary", "Maybe"}}), 422);
  EXPECT_EQ(patch_status({{"checks", {{{"id", "x"}, {"status", "Broken"}}}}}), 422);
  EXPECT_EQ(patch_status({{"checks", {{{"status", "Pass"}}}}}), 422);  // id required
  EXPECT_EQ(patch_status({{"lastProbeTime", "yesterday"}}), 422);
  // Cluster-scoped: there is no namespaced path.
  EXPECT_EQ(
      client_->Get("/apis/ncclguard.io/v1alpha1/namespaces/" + namespace_ + "/nodevalidations")
          .status,
      404);
}

TEST_F(OperatorAgainstApiServer, NcclPolicySchemaAndConversion) {
  const std::string path = "/apis/ncclguard.io/v1alpha1/ncclpolicies";
  client_->Delete(path + "/default");
  ASSERT_TRUE(Eventually([&] { return client_->Get(path + "/default").status == 404; },
                         std::chrono::seconds(10)));
  const nlohmann::json good{
      {"apiVersion", "ncclguard.io/v1alpha1"},
      {"kind", "NcclPolicy"},
      {"metadata", {{"name", "default"}}},
      {"spec",
       {{"guideBaseURL", "https://wiki.example/nccl"},
        {"gate", {{"enabled", true}, {"countUnvalidatedNodes", true}}},
        {"rendezvousPort", 23456},
        {"instanceTypes",
         {{{"name", "p6-b200.48xlarge"}, {"efaDevices", 8}, {"gpus", 8}, {"gpudirectRdma", true}}}},
        {"rules", {{"image-unpinned", {{"level", "deny"}}}}}}}};
  const KubeResponse created = client_->Post(path, good);
  ASSERT_EQ(created.status, 201) << created.body;
  // What the server stores (with its metadata) converts to the policy the user wrote.
  controllers::PolicyHolder holder;
  EXPECT_FALSE(holder.Update(ToCore(created.Json())));
  EXPECT_EQ(holder.Current().rendezvous_port, 23456);
  EXPECT_TRUE(holder.Current().gate.count_unvalidated_nodes);
  ASSERT_NE(holder.Current().FindInstanceType("p6-b200.48xlarge"), nullptr);

  nlohmann::json other = good;
  other["metadata"]["name"] = "other";
  EXPECT_EQ(client_->Post(path, other).status, 422);
  nlohmann::json bad_port = good;
  bad_port["spec"]["rendezvousPort"] = 70000;
  EXPECT_EQ(client_->Post(path + "?dryRun=All", bad_port).status, 422);
  EXPECT_EQ(client_
                ->Request("PATCH", path + "/default", R"({"spec":{"rendezvousPort":70000}})",
                          "application/merge-patch+json")
                .status,
            422);
  EXPECT_EQ(client_
                ->Request("PATCH", path + "/default", R"({"spec":{"gate":{"enabled":"yes"}}})",
                          "application/merge-patch+json")
                .status,
            422);
  EXPECT_EQ(client_
                ->Request("PATCH", path + "/default", R"({"spec":{"rules":{"x":{"level":"ban"}}}})",
                          "application/merge-patch+json")
                .status,
            422);

  // The schema cannot know rule ids; the conversion rejects one and the last good policy stays.
  const KubeResponse unknown_rule = client_->Request(
      "PATCH", path + "/default", R"({"spec":{"rules":{"no-such-rule":{"enabled":false}}}})",
      "application/merge-patch+json");
  ASSERT_EQ(unknown_rule.status, 200) << unknown_rule.body;
  const auto error = holder.Update(ToCore(unknown_rule.Json()));
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("spec.rules.no-such-rule"), std::string::npos) << *error;
  EXPECT_EQ(holder.Current().rendezvous_port, 23456);
  // The author sees why on the object.
  const auto status = controllers::PolicyStatusPatch(ToCore(unknown_rule.Json()), error, Now());
  ASSERT_TRUE(status);
  const KubeResponse reported = client_->Request("PATCH", path + "/default/status", status->dump(),
                                                 "application/merge-patch+json");
  ASSERT_EQ(reported.status, 200) << reported.body;
  EXPECT_EQ(reported.Json()["status"]["conditions"][0]["reason"], "Invalid");
  EXPECT_FALSE(controllers::PolicyStatusPatch(ToCore(reported.Json()), error, Now()));
  client_->Delete(path + "/default");
}

}  // namespace
}  // namespace ncclguard::testenv
