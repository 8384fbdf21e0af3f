#include "webhook/admission_handler.h"

#include <gtest/gtest.h>

#include <string>

#include "core/gate.h"
#include "core/guide.h"
#include "tests/unit/test_support.h"

namespace ncclguard::webhook {
namespace {

using core::Json;
using test::CompliantPod;
using test::Yaml;

AdmissionRequest Request(Json object, std::string operation = "CREATE") {
  AdmissionRequest request;
  request.uid = "uid-1";
  const std::string api_version = object.value("apiVersion", "");
  const auto slash = api_version.find('/');
  request.kind.group = slash == std::string::npos ? "" : api_version.substr(0, slash);
  request.kind.version = slash == std::string::npos ? api_version : api_version.substr(slash + 1);
  request.kind.kind = object.value("kind", "");
  request.operation = std::move(operation);
  request.namespace_ = "ml";
  request.name = object["metadata"].value("name", "");
  request.object = std::move(object);
  return request;
}

AdmissionOutcome Mutate(Json object, const core::Policy& policy = core::Policy::Defaults()) {
  return Admit(Endpoint::Mutate, Request(std::move(object)), policy, {});
}

AdmissionOutcome Validate(Json object, const core::Policy& policy = core::Policy::Defaults()) {
  return Admit(Endpoint::Validate, Request(std::move(object)), policy, {});
}

// A p5 pod with none of the settings ncclguard adds.
Json BarePod() {
  return Yaml(R"(
apiVersion: v1
kind: Pod
metadata: {name: w0, namespace: ml}
spec:
  nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
  containers:
    - name: pytorch
      image: registry.example/train:1.0
      resources:
        limits: {nvidia.com/gpu: 8, memory: 1000Gi}
)");
}

Json PyTorchJob(const std::string& proto = "Simple") {
  return Yaml(R"(
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: llama, namespace: ml}
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
          containers:
            - name: pytorch
              image: registry.example/train:1.0
              env: [{name: NCCL_PROTO, value: )" +
              proto + R"(}]
              resources:
                limits: {nvidia.com/gpu: 8, memory: 1000Gi}
)");
}

Json Patched(Json object, const Json& patch) {
  if (patch.is_array()) object.patch_inplace(patch);
  return object;
}

TEST(AdmitPod, MutateAddsTheMissingSettingsAndAFixedPodNeedsNoMore) {
  const AdmissionOutcome first = Mutate(BarePod());
  EXPECT_TRUE(first.response.allowed);
  EXPECT_EQ(first.result, AdmitResult::Patched);
  EXPECT_EQ(first.response.uid, "uid-1");
  const Json fixed = Patched(BarePod(), first.response.patch);
  EXPECT_EQ(fixed["spec"]["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"], "32");
  EXPECT_EQ(fixed["spec"]["containers"][0]["securityContext"]["capabilities"]["add"],
            Json::array({"IPC_LOCK"}));

  const AdmissionOutcome second = Mutate(fixed);
  EXPECT_EQ(second.result, AdmitResult::Allowed);
  EXPECT_TRUE(second.response.patch.is_null() || second.response.patch.empty());

  const AdmissionOutcome validated = Validate(fixed);
  EXPECT_TRUE(validated.response.allowed);
  EXPECT_TRUE(validated.response.warnings.empty()) << validated.response.warnings.front();
}

TEST(AdmitPod, ACompliantPodGetsNoPatch) {
  const AdmissionOutcome outcome = Mutate(CompliantPod());
  EXPECT_EQ(outcome.result, AdmitResult::Allowed);
  EXPECT_TRUE(outcome.response.patch.is_null());
}

TEST(AdmitPod, ValidateDeniesWithEveryProblemItsFixAndGuideLink) {
  Json pod = CompliantPod();
  pod["spec"]["containers"][0]["env"].push_back({{"name", "NCCL_PROTO"}, {"value", "fast"}});
  pod["spec"]["containers"][0]["env"].push_back({{"name", "NCCL_ALGO"}, {"value", "bogus"}});
  const AdmissionOutcome outcome = Validate(pod);
  EXPECT_FALSE(outcome.response.allowed);
  EXPECT_EQ(outcome.result, AdmitResult::Denied);
  EXPECT_EQ(outcome.response.status_code, 403);
  const std::string& message = outcome.response.message;
  EXPECT_EQ(message.rfind("ncclguard denied Pod ml/trainer: 2 problems", 0), 0u) << message;
  EXPECT_NE(message.find("[nccl-proto-invalid]"), std::string::npos);
  EXPECT_NE(message.find("[nccl-algo-invalid]"), std::string::npos);
  EXPECT_NE(message.find("Fix: "), std::string::npos);
  EXPECT_NE(message.find(core::GuideLink(core::kDefaultGuideBaseUrl, "efa-config")),
            std::string::npos);
  EXPECT_NE(message.find(core::GuideLink(core::kDefaultGuideBaseUrl, "advanced-tuning")),
            std::string::npos);
}

TEST(AdmitPod, MutateNeverDenies) {
  Json pod = BarePod();
  pod["spec"]["containers"][0]["env"] = Json::array({{{"name", "NCCL_PROTO"}, {"value", "x"}}});
  const AdmissionOutcome outcome = Mutate(pod);
  EXPECT_TRUE(outcome.response.allowed);
  EXPECT_EQ(outcome.result, AdmitResult::Patched);
}

TEST(AdmitPod, WarnFindingsBecomeShortWarningsNamingTheRule) {
  Json pod = CompliantPod();
  pod["spec"]["containers"][0]["image"] = "registry.example/train:latest";
  pod["spec"]["containers"][0]["resources"]["limits"].erase("memory");
  const AdmissionOutcome outcome = Validate(pod);
  EXPECT_TRUE(outcome.response.allowed);
  EXPECT_EQ(outcome.result, AdmitResult::Warned);
  ASSERT_EQ(outcome.response.warnings.size(), 2u);
  EXPECT_EQ(outcome.response.warnings[0].rfind("ncclguard image-unpinned: ", 0), 0u);
  EXPECT_EQ(outcome.response.warnings[1].rfind("ncclguard memory-limit-missing: ", 0), 0u);
  for (const auto& warning : outcome.response.warnings) EXPECT_LE(warning.size(), 256u);
}

TEST(AdmitPod, AnUnmutatedPodIsAdmittedWithWarningsAboutTheMissingFixes) {
  const AdmissionOutcome outcome = Validate(BarePod());
  EXPECT_TRUE(outcome.response.allowed);
  bool efa_warning = false;
  for (const auto& warning : outcome.response.warnings) {
    efa_warning = efa_warning || warning.find("efa-resources-missing") != std::string::npos;
  }
  EXPECT_TRUE(efa_warning);
}

TEST(AdmitPod, LongWarningsAreCutTo256CharactersKeepingRuleAndLink) {
  core::Finding finding;
  finding.rule = "memory-limit-missing";
  finding.guide = core::GuideLink(core::kDefaultGuideBaseUrl, "container-oom");
  finding.message = std::string(1000, 'x');
  const std::string warning = WarningText(finding);
  EXPECT_EQ(warning.size(), 256u);
  EXPECT_EQ(warning.rfind("ncclguard memory-limit-missing: ", 0), 0u);
  EXPECT_NE(warning.find("... (" + finding.guide + ")"), std::string::npos);
}

TEST(AdmitPod, KubeSystemAndExemptNamespacesAreNeverTouched) {
  AdmissionRequest request = Request(BarePod());
  request.namespace_ = "kube-system";
  AdmissionOutcome outcome =
      Admit(Endpoint::Mutate, request, core::Policy::Defaults(), AdmitOptions{});
  EXPECT_EQ(outcome.result, AdmitResult::Skipped);
  EXPECT_TRUE(outcome.response.patch.is_null());

  request.namespace_ = "ncclguard-system";
  outcome = Admit(Endpoint::Validate, request, core::Policy::Defaults(),
                  AdmitOptions{.exempt_namespaces = {"ncclguard-system"}});
  EXPECT_EQ(outcome.result, AdmitResult::Skipped);
  EXPECT_TRUE(outcome.response.allowed);
}

TEST(AdmitPod, DeleteConnectSubresourcesAndUnknownKindsPass) {
  for (const char* operation : {"DELETE", "CONNECT"}) {
    AdmissionRequest request = Request(BarePod(), operation);
    EXPECT_EQ(Admit(Endpoint::Validate, request, core::Policy::Defaults(), {}).result,
              AdmitResult::Skipped);
  }
  AdmissionRequest status = Request(BarePod(), "UPDATE");
  status.sub_resource = "status";
  EXPECT_EQ(Admit(Endpoint::Validate, status, core::Policy::Defaults(), {}).result,
            AdmitResult::Skipped);
  const Json config_map = {{"apiVersion", "v1"},
                           {"kind", "ConfigMap"},
                           {"metadata", {{"name", "c"}}},
                           {"data", {{"NCCL_PROTO", "fast"}}}};
  EXPECT_EQ(Validate(config_map).result, AdmitResult::Skipped);
}

TEST(AdmitPod, PodUpdatesAreNotRejudged) {
  Json pod = CompliantPod();
  pod["spec"]["containers"][0]["env"].push_back({{"name", "NCCL_PROTO"}, {"value", "fast"}});
  EXPECT_EQ(Admit(Endpoint::Validate, Request(pod, "UPDATE"), core::Policy::Defaults(), {}).result,
            AdmitResult::Skipped);
}

TEST(AdmitJob, CreateOfAManagedJobIsSuspendedAndMarkedPending) {
  const AdmissionOutcome outcome = Mutate(PyTorchJob());
  ASSERT_EQ(outcome.result, AdmitResult::Patched);
  const Json marked = Patched(PyTorchJob(), outcome.response.patch);
  EXPECT_EQ(marked["spec"]["runPolicy"]["suspend"], true);
  EXPECT_EQ(marked["metadata"]["annotations"]["ncclguard.io/gate"], "pending");
  // Nothing else changed.
  Json unmarked = marked;
  unmarked["spec"].erase("runPolicy");
  unmarked["metadata"].erase("annotations");
  EXPECT_EQ(unmarked, PyTorchJob());
}

TEST(AdmitJob, TheGateKeepsExistingRunPolicyAndAnnotations) {
  Json job = PyTorchJob();
  job["spec"]["runPolicy"] = {{"suspend", false}, {"backoffLimit", 3}};
  job["metadata"]["annotations"] = {{"team", "llm"}};
  const Json marked = Patched(job, Mutate(job).response.patch);
  EXPECT_EQ(marked["spec"]["runPolicy"]["suspend"], true);
  EXPECT_EQ(marked["spec"]["runPolicy"]["backoffLimit"], 3);
  EXPECT_EQ(marked["metadata"]["annotations"]["team"], "llm");
  EXPECT_EQ(marked["metadata"]["annotations"]["ncclguard.io/gate"], "pending");
}

// The gate's fast path: the controller's count says the job's validated nodes exist.
AdmitOptions CountSays(bool nodes_ready, int* asked = nullptr) {
  AdmitOptions options;
  options.gate = [nodes_ready, asked](const Json& job, const core::Policy&,
                                      const core::RuntimeLookup&) {
    if (asked != nullptr) ++*asked;
    EXPECT_EQ(job.value("kind", ""), "PyTorchJob");
    return nodes_ready;
  };
  return options;
}

TEST(AdmitJob, AJobWhoseValidatedNodesExistIsAdmittedUnsuspendedAndMarkedAdmitted) {
  Json job = PyTorchJob();
  job["metadata"]["annotations"] = {{"team", "llm"}};
  const AdmissionOutcome outcome =
      Admit(Endpoint::Mutate, Request(job), core::Policy::Defaults(), CountSays(true));
  ASSERT_EQ(outcome.result, AdmitResult::Patched);
  EXPECT_EQ(outcome.gate, GateDecision::Admitted);
  const Json marked = Patched(job, outcome.response.patch);
  EXPECT_EQ(marked["metadata"]["annotations"]["ncclguard.io/gate"], "admitted");
  EXPECT_EQ(marked["metadata"]["annotations"]["team"], "llm");
  // Not suspended: the operator starts it at once. Nothing else changed.
  Json unmarked = marked;
  unmarked["metadata"]["annotations"].erase("ncclguard.io/gate");
  EXPECT_EQ(unmarked, job);
}

TEST(AdmitJob, AJobWhoseNodesAreNotThereIsHeldAsBefore) {
  const AdmissionOutcome outcome =
      Admit(Endpoint::Mutate, Request(PyTorchJob()), core::Policy::Defaults(), CountSays(false));
  EXPECT_EQ(outcome.gate, GateDecision::Held);
  const Json marked = Patched(PyTorchJob(), outcome.response.patch);
  EXPECT_EQ(marked["spec"]["runPolicy"]["suspend"], true);
  EXPECT_EQ(marked["metadata"]["annotations"]["ncclguard.io/gate"], "pending");
  EXPECT_EQ(Mutate(PyTorchJob()).gate, GateDecision::Held);  // no count at all: held
}

TEST(AdmitJob, TheFastPathIsNotAskedWhenThePolicyTurnsItOffInAuditModeOrOnUpdate) {
  int asked = 0;
  core::Policy hold_all = core::Policy::Defaults();
  hold_all.gate.admit_when_ready = false;
  const AdmissionOutcome held =
      Admit(Endpoint::Mutate, Request(PyTorchJob()), hold_all, CountSays(true, &asked));
  EXPECT_EQ(held.gate, GateDecision::Held);
  EXPECT_EQ(
      Patched(PyTorchJob(), held.response.patch)["metadata"]["annotations"]["ncclguard.io/gate"],
      "pending");
  const AdmissionOutcome audited =
      Admit(Endpoint::Mutate, Request(PyTorchJob()), core::Policy::Defaults(),
            CountSays(true, &asked), core::Mode::Audit);
  EXPECT_EQ(audited.gate, GateDecision::None);
  EXPECT_TRUE(audited.response.patch.is_null());
  Admit(Endpoint::Mutate, Request(PyTorchJob(), "UPDATE"), core::Policy::Defaults(),
        CountSays(true, &asked));
  EXPECT_EQ(asked, 0);
  Admit(Endpoint::Mutate, Request(PyTorchJob()), core::Policy::Defaults(), CountSays(true, &asked));
  EXPECT_EQ(asked, 1);
}

TEST(AdmitJob, BatchJobsAreGatedOnlyWithTheManagedLabel) {
  const Json job = Yaml(R"(
apiVersion: batch/v1
kind: Job
metadata: {name: j, namespace: ml}
spec:
  suspend: false
  template:
    spec:
      restartPolicy: Never
      containers: [{name: main, image: "x:1"}]
)");
  EXPECT_EQ(Mutate(job).result, AdmitResult::Allowed);
  Json managed = job;
  managed["metadata"]["labels"] = {{"ncclguard.io/managed", "true"}};
  const Json marked = Patched(managed, Mutate(managed).response.patch);
  EXPECT_EQ(marked["spec"]["suspend"], true);
  EXPECT_EQ(marked["metadata"]["annotations"]["ncclguard.io/gate"], "pending");
}

TEST(AdmitJob, NoGateWhenThePolicyTurnsItOffOrOnUpdate) {
  core::Policy policy = core::Policy::Defaults();
  policy.gate.enabled = false;
  EXPECT_EQ(Mutate(PyTorchJob(), policy).result, AdmitResult::Allowed);
  EXPECT_EQ(
      Admit(Endpoint::Mutate, Request(PyTorchJob(), "UPDATE"), core::Policy::Defaults(), {}).result,
      AdmitResult::Skipped);
}

TEST(AdmitJob, AJobQueuedByKueueIsLeftToKueueUnlessThePolicySaysNot) {
  Json queued = PyTorchJob();
  queued["metadata"]["labels"] = {{"kueue.x-k8s.io/queue-name", "team-a"}};
  // Kueue suspends and resumes it: no gate mark, no suspend from us.
  EXPECT_EQ(Mutate(queued).result, AdmitResult::Allowed);
  // The denials still apply to it.
  Json bad = PyTorchJob("fast");
  bad["metadata"]["labels"] = queued["metadata"]["labels"];
  EXPECT_FALSE(Validate(bad).response.allowed);
  // An empty queue name is no queue.
  Json empty = PyTorchJob();
  empty["metadata"]["labels"] = {{"kueue.x-k8s.io/queue-name", ""}};
  EXPECT_EQ(Mutate(empty).result, AdmitResult::Patched);
  core::Policy policy = core::Policy::Defaults();
  policy.gate.defer_to_kueue = false;
  const Json marked = Patched(queued, Mutate(queued, policy).response.patch);
  EXPECT_EQ(marked["metadata"]["annotations"]["ncclguard.io/gate"], "pending");
}

TEST(AdmitJob, ValidateDeniesTemplateAndJobLevelProblems) {
  const AdmissionOutcome proto = Validate(PyTorchJob("fast"));
  EXPECT_FALSE(proto.response.allowed);
  EXPECT_NE(proto.response.message.find("[nccl-proto-invalid]"), std::string::npos);
  EXPECT_NE(proto.response.message.find("PyTorchJob ml/llama"), std::string::npos);

  Json world = PyTorchJob();
  world["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"]
      .push_back({{"name", "WORLD_SIZE"}, {"value", "64"}});
  world["spec"]["nprocPerNode"] = "8";
  const AdmissionOutcome outcome = Validate(world);
  EXPECT_FALSE(outcome.response.allowed);
  EXPECT_NE(outcome.response.message.find("[world-size-mismatch]"), std::string::npos);
}

TEST(AdmitJob, AProblemSharedByTemplatesIsListedOnceWithWhereItIs) {
  Json job = PyTorchJob("fast");
  job["spec"]["pytorchReplicaSpecs"]["Master"] = job["spec"]["pytorchReplicaSpecs"]["Worker"];
  job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 1;
  const std::string message = Validate(job).response.message;
  EXPECT_NE(message.find("1 problem\n"), std::string::npos) << message;
  EXPECT_NE(message.find("(at /spec/pytorchReplicaSpecs/"), std::string::npos) << message;
  EXPECT_NE(message.find(" and 1 more)"), std::string::npos) << message;
}

TEST(AdmitJob, ValidateIsQuietAboutFixesThePodsWillGet) {
  const AdmissionOutcome outcome = Validate(PyTorchJob());
  EXPECT_TRUE(outcome.response.allowed);
  for (const auto& warning : outcome.response.warnings) {
    EXPECT_EQ(warning.find("efa-resources-missing"), std::string::npos) << warning;
  }
}

TEST(AdmitJob, AnUpdateIsDeniedOnlyForProblemsItIntroduces) {
  AdmissionRequest release = Request(PyTorchJob("fast"), "UPDATE");
  release.old_object = PyTorchJob("fast");
  release.object["spec"]["runPolicy"] = {{"suspend", false}};
  EXPECT_TRUE(Admit(Endpoint::Validate, release, core::Policy::Defaults(), {}).response.allowed);

  AdmissionRequest edit = Request(PyTorchJob("fast"), "UPDATE");
  edit.old_object = PyTorchJob();
  const AdmissionOutcome outcome = Admit(Endpoint::Validate, edit, core::Policy::Defaults(), {});
  EXPECT_FALSE(outcome.response.allowed);
  EXPECT_NE(outcome.response.message.find("[nccl-proto-invalid]"), std::string::npos);
}

TEST(AdmitJob, AnUnreadableSpecIsDeniedWithTheFieldNotACrash) {
  Json job = PyTorchJob();
  job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "two";
  for (Endpoint endpoint : {Endpoint::Mutate, Endpoint::Validate}) {
    const AdmissionOutcome outcome = Admit(endpoint, Request(job), core::Policy::Defaults(), {});
    EXPECT_FALSE(outcome.response.allowed);
    EXPECT_EQ(outcome.response.status_code, 400);
    EXPECT_NE(outcome.response.message.find("ncclguard cannot read PyTorchJob ml/llama"),
              std::string::npos)
        << outcome.response.message;
    EXPECT_NE(outcome.response.message.find("replicas"), std::string::npos);
  }
}

TEST(AdmitJob, GateMarkRefusesAJobWithoutASpecObject) {
  Json job = PyTorchJob();
  job["spec"] = "nope";
  const AdmissionOutcome outcome = Mutate(job);
  EXPECT_FALSE(outcome.response.allowed);
  EXPECT_EQ(outcome.result, AdmitResult::Denied);
}

}  // namespace
}  // namespace ncclguard::webhook
