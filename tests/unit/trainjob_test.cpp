// Kubeflow Trainer v2: a TrainJob is checked as the JobSet the Trainer makes of it and its
// runtime (core/trainjob.h), its fixes come back as ncclguard's runtime patch, its runtime is
// checked on its own, and the JobSet the Trainer makes is managed through the TrainJob.
#include "core/trainjob.h"

#include <gtest/gtest.h>

#include <string>

#include "core/engine.h"
#include "core/errors.h"
#include "core/gate.h"
#include "core/rendezvous.h"
#include "core/rules/rule_util.h"
#include "core/workload.h"
#include "tests/unit/test_support.h"
#include "webhook/admission_handler.h"

namespace ncclguard::test {
namespace {

using core::Json;
using core::JsonPointer;

// The shape of Trainer's torch-distributed runtime (manifests/base/runtimes), on p5 nodes, with an
// initializer job ahead of the trainer.
Json P5Runtime() {
  return Yaml(R"(
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: torch-p5}
spec:
  mlPolicy: {numNodes: 1, torch: {}}
  template:
    metadata: {labels: {team: ml}}
    spec:
      replicatedJobs:
        - name: dataset-initializer
          template:
            metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}}
            spec:
              template:
                spec:
                  containers: [{name: dataset-initializer, image: init:1}]
        - name: node
          template:
            metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
            spec:
              template:
                spec:
                  nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
                  containers:
                    - name: node
                      image: pytorch/pytorch:2.10.0
                      env: [{name: NCCL_DEBUG, value: WARN}]
                      resources: {limits: {nvidia.com/gpu: 8}}
)");
}

Json TrainJob() {
  return Yaml(R"(
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: llama, namespace: ml}
spec:
  runtimeRef: {name: torch-p5}
  trainer:
    image: registry.example/train:1.0
    numNodes: 2
    numProcPerNode: 8
    env: [{name: NCCL_DEBUG, value: INFO}, {name: EXTRA, value: "1"}]
    resourcesPerNode: {limits: {nvidia.com/gpu: 8, memory: 1000Gi}}
)");
}

core::RuntimeLookup Runtimes(const Json& runtime) {
  return [runtime](const core::RuntimeRef& ref, std::string_view) -> std::optional<Json> {
    if (ref.kind == core::WorkloadKind::ClusterTrainingRuntime &&
        ref.name == runtime["metadata"]["name"]) {
      return runtime;
    }
    return std::nullopt;
  };
}

const Json& NodeJob(const Json& jobset) { return jobset.at("/spec/replicatedJobs/1"_json_pointer); }
const Json& NodeContainer(const Json& jobset) {
  return NodeJob(jobset).at("/template/spec/template/spec/containers/0"_json_pointer);
}

TEST(TrainJobRendering, TheTrainerFieldsGoToTheNodeContainerOfTheRuntimesNodeJob) {
  const Json runtime = P5Runtime();
  const Json jobset = core::RenderTrainJob(TrainJob(), &runtime);
  EXPECT_EQ(jobset["kind"], "JobSet");
  EXPECT_EQ(jobset["metadata"]["name"], "llama");
  EXPECT_EQ(jobset["metadata"]["labels"]["team"], "ml");
  ASSERT_EQ(jobset["spec"]["replicatedJobs"].size(), 2u);
  EXPECT_EQ(NodeJob(jobset)["template"]["spec"]["parallelism"], 2);
  EXPECT_EQ(NodeJob(jobset)["template"]["spec"]["completions"], 2);
  const Json& node = NodeContainer(jobset);
  EXPECT_EQ(node["image"], "registry.example/train:1.0");
  // An env entry of the same name replaces the runtime's; others are added.
  EXPECT_EQ(
      node["env"],
      Json::parse(R"([{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "EXTRA", "value": "1"}])"));
  EXPECT_EQ(node["resources"]["limits"]["memory"], "1000Gi");
  // The runtime's other job and the pod's other fields are the runtime's.
  EXPECT_EQ(jobset["spec"]["replicatedJobs"][0]["name"], "dataset-initializer");
  EXPECT_EQ(NodeJob(jobset)["template"]["spec"]["template"]["spec"]["nodeSelector"],
            (Json{{"node.kubernetes.io/instance-type", "p5.48xlarge"}}));
}

TEST(TrainJobRendering, WithoutARuntimeTheNodeJobIsWhatSpecTrainerSays) {
  const Json jobset = core::RenderTrainJob(TrainJob(), nullptr);
  ASSERT_EQ(jobset["spec"]["replicatedJobs"].size(), 1u);
  const Json& job = jobset["spec"]["replicatedJobs"][0];
  EXPECT_EQ(job["name"], "node");
  EXPECT_EQ(job["template"]["spec"]["parallelism"], 2);
  EXPECT_EQ(job["template"]["spec"]["template"]["spec"]["containers"][0]["image"],
            "registry.example/train:1.0");
}

TEST(TrainJobRendering, RuntimePatchesApplyInOrderByJobAndContainerName) {
  Json trainjob = TrainJob();
  trainjob["spec"]["runtimePatches"] = Yaml(R"(
patches:
- manager: team.example/scheduling
  trainingRuntimeSpec:
    template:
      metadata: {annotations: {a: b}}
      spec:
        replicatedJobs:
          - name: node
            template:
              spec:
                template:
                  metadata: {labels: {pod: label}}
                  spec:
                    nodeSelector: {zone: a}
                    tolerations: [{key: gpu, operator: Exists}]
                    volumes: [{name: data, emptyDir: {}}]
                    containers:
                      - name: node
                        env: [{name: EXTRA, value: "2"}]
                        volumeMounts: [{name: data, mountPath: /data}]
                        securityContext: {capabilities: {add: [SYS_PTRACE]}}
                      - {name: absent, env: [{name: X, value: "1"}]}
          - name: no-such-job
            template: {spec: {template: {spec: {nodeSelector: {x: y}}}}}
)")["patches"];
  const Json runtime = P5Runtime();
  const Json jobset = core::RenderTrainJob(trainjob, &runtime);
  EXPECT_EQ(jobset["metadata"]["annotations"]["a"], "b");
  const Json& pod = NodeJob(jobset)["template"]["spec"]["template"];
  EXPECT_EQ(pod["metadata"]["labels"]["pod"], "label");
  EXPECT_EQ(pod["spec"]["nodeSelector"],
            (Json{{"node.kubernetes.io/instance-type", "p5.48xlarge"}, {"zone", "a"}}));
  EXPECT_EQ(pod["spec"]["tolerations"].size(), 1u);
  ASSERT_EQ(pod["spec"]["containers"].size(), 1u) << "a patch adds no container";
  const Json& node = pod["spec"]["containers"][0];
  EXPECT_EQ(node["env"][1], Json({{"name", "EXTRA"}, {"value", "2"}}));
  EXPECT_EQ(node["volumeMounts"][0]["mountPath"], "/data");
  EXPECT_EQ(node["securityContext"]["capabilities"]["add"][0], "SYS_PTRACE");
}

TEST(TrainJobRendering, FieldsOfTheWrongTypeAreInputErrors) {
  Json trainjob = TrainJob();
  trainjob["spec"]["trainer"]["env"] = "NCCL_DEBUG=INFO";
  EXPECT_THROW(core::RenderTrainJob(trainjob, nullptr), core::InputError);
  Json runtime = P5Runtime();
  runtime["spec"]["template"]["spec"]["replicatedJobs"] = Json::object();
  EXPECT_THROW(core::RenderTrainJob(TrainJob(), &runtime), core::InputError);
  trainjob = TrainJob();
  trainjob["spec"]["runtimePatches"] = Json::array({Json{{"trainingRuntimeSpec", 3}}});
  EXPECT_THROW(core::RenderTrainJob(trainjob, nullptr), core::InputError);
  trainjob["spec"]["runtimeRef"]["kind"] = 7;
  EXPECT_THROW(core::RuntimeRefOf(trainjob), core::InputError);
}

TEST(TrainJobWorkload, TheRanksAreNodesTimesProcessesAndTheInitializersRunNone) {
  const auto workload = core::ParseWorkload(TrainJob(), Runtimes(P5Runtime()));
  ASSERT_TRUE(workload && workload->rendered);
  ASSERT_EQ(workload->templates.size(), 2u);
  EXPECT_EQ(workload->templates[1].role, "node");
  EXPECT_EQ(workload->templates[1].pods, 2);
  EXPECT_EQ(workload->templates[1].ranks_per_pod, 8);
  EXPECT_EQ(core::RankPods(*workload), 2);
  EXPECT_EQ(core::RankZeroHostname(TrainJob()), "llama-node-0-0");
  EXPECT_EQ(core::MasterAddress(TrainJob(), "cluster.local"),
            "llama-node-0-0.llama.ml.svc.cluster.local");
}

TEST(TrainJobRules, TheRuntimesPodsAreCheckedAndFindingsPointAtTheTrainJob) {
  Json trainjob = TrainJob();
  trainjob["spec"]["trainer"]["env"].push_back(Json({{"name", "NCCL_PROTO"}, {"value", "fast"}}));
  trainjob["spec"]["trainer"]["env"].push_back(Json({{"name", "WORLD_SIZE"}, {"value", "8"}}));
  const auto evaluation =
      core::Evaluate(trainjob, core::Policy::Defaults(), {.runtimes = Runtimes(P5Runtime())});
  EXPECT_TRUE(evaluation.HasDeny());
  const auto proto = FindingsOf(evaluation, "nccl-proto-invalid");
  ASSERT_EQ(proto.size(), 1u);
  EXPECT_EQ(proto[0].path, "/spec/trainer");
  EXPECT_EQ(proto[0].object.kind, "TrainJob");
  // 2 nodes x 8 processes, not 8.
  EXPECT_FALSE(FindingsOf(evaluation, "world-size-mismatch").empty());
  // The nodeSelector is the runtime's: without it the type is not known.
  EXPECT_FALSE(FindingsOf(evaluation, "efa-resources-missing").empty());
  const auto alone = core::Evaluate(TrainJob(), core::Policy::Defaults());
  EXPECT_TRUE(FindingsOf(alone, "efa-resources-missing").empty());
  // Nor is it said to lack one: the runtime, unknown here, usually pins it.
  EXPECT_TRUE(FindingsOf(alone, "instance-type-unknown").empty());
  Json runtime = P5Runtime();
  runtime["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
      .erase("nodeSelector");
  const auto without_type =
      core::Evaluate(TrainJob(), core::Policy::Defaults(), {.runtimes = Runtimes(runtime)});
  EXPECT_FALSE(FindingsOf(without_type, "instance-type-unknown").empty());
}

TEST(TrainJobFixes, IpcLockAndDevShmComeBackAsNcclguardsRuntimePatch) {
  const auto evaluation =
      core::Evaluate(TrainJob(), core::Policy::Defaults(), {.runtimes = Runtimes(P5Runtime())});
  ASSERT_EQ(evaluation.patch.size(), 1u);
  EXPECT_EQ(evaluation.patch[0]["path"], "/spec/runtimePatches");
  const Json& patches = evaluation.fixed["spec"]["runtimePatches"];
  ASSERT_EQ(patches.size(), 1u);
  EXPECT_EQ(patches[0]["manager"], std::string(core::kRuntimePatchManager));
  const Json& spec = patches[0].at(
      "/trainingRuntimeSpec/template/spec/replicatedJobs/0/template/spec/template/spec"_json_pointer);
  EXPECT_EQ(patches[0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["name"],
            "node");
  ASSERT_EQ(spec["volumes"].size(), 1u);
  EXPECT_EQ(spec["volumes"][0]["emptyDir"]["medium"], "Memory");
  const Json& node = spec["containers"][0];
  EXPECT_EQ(node["name"], "node");
  EXPECT_EQ(node["securityContext"]["capabilities"]["add"], Json::array({"IPC_LOCK"}));
  EXPECT_EQ(node["volumeMounts"][0]["mountPath"], "/dev/shm");
  // Trainer refuses env of the container "node" in a patch; resources have no place there: both
  // are the pods' (the webhook fixes them when they are created).
  EXPECT_FALSE(node.contains("env"));
  EXPECT_FALSE(node.contains("resources"));
  // The user's spec is not edited.
  EXPECT_EQ(evaluation.fixed["spec"]["trainer"], TrainJob()["spec"]["trainer"]);
}

TEST(TrainJobFixes, AreIdempotentAndKeepOtherManagersPatches) {
  Json trainjob = TrainJob();
  trainjob["spec"]["runtimePatches"] = Json::parse(R"([{"manager": "team.example/scheduling",
    "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": "node",
      "template": {"spec": {"template": {"spec": {"nodeSelector": {"z": "a"}}}}}}]}}}}])");
  const core::RuntimeLookup runtimes = Runtimes(P5Runtime());
  const auto once = core::Evaluate(trainjob, core::Policy::Defaults(), {.runtimes = runtimes});
  ASSERT_EQ(once.patch.size(), 1u);
  EXPECT_EQ(once.patch[0]["path"], "/spec/runtimePatches/-");
  EXPECT_EQ(once.fixed["spec"]["runtimePatches"][0], trainjob["spec"]["runtimePatches"][0]);
  const auto twice = core::Evaluate(once.fixed, core::Policy::Defaults(), {.runtimes = runtimes});
  EXPECT_TRUE(twice.patch.empty());
  EXPECT_EQ(twice.fixed, once.fixed);
  // With its patch applied, the IPC_LOCK and /dev/shm findings are gone.
  EXPECT_TRUE(FindingsOf(twice, "ipc-lock-missing").empty());
  EXPECT_TRUE(FindingsOf(twice, "dev-shm-missing").empty());
}

TEST(TrainJobFixes, AnEntryOfOursIsNeverRewritten) {
  Json trainjob = TrainJob();
  trainjob["spec"]["runtimePatches"] =
      Json::array({Json{{"manager", std::string(core::kRuntimePatchManager)}}});
  EXPECT_TRUE(core::HasRuntimePatch(trainjob));
  const auto evaluation =
      core::Evaluate(trainjob, core::Policy::Defaults(), {.runtimes = Runtimes(P5Runtime())});
  EXPECT_TRUE(evaluation.patch.empty()) << "entries are immutable once made";
  EXPECT_FALSE(FindingsOf(evaluation, "ipc-lock-missing").empty());
}

webhook::AdmissionRequest Request(Json object, std::string operation = "CREATE") {
  webhook::AdmissionRequest request;
  request.uid = "uid-1";
  request.operation = std::move(operation);
  request.namespace_ = object["metadata"].value("namespace", "");
  request.name = object["metadata"].value("name", "");
  request.object = std::move(object);
  return request;
}

TEST(TrainJobWebhook, ATrainJobIsGatedAndGetsOurRuntimePatchInOneAnswer) {
  const auto outcome =
      webhook::Admit(webhook::Endpoint::Mutate, Request(TrainJob()), core::Policy::Defaults(), {});
  EXPECT_EQ(outcome.result, webhook::AdmitResult::Patched);
  const Json fixed = TrainJob().patch(outcome.response.patch);
  EXPECT_EQ(fixed["spec"]["suspend"], true);
  EXPECT_EQ(fixed["metadata"]["annotations"][std::string(core::kGateAnnotation)],
            std::string(core::kGatePending));
  // No runtime known to the webhook: the patch says what spec.trainer alone lacks.
  EXPECT_TRUE(core::HasRuntimePatch(fixed));
}

TEST(TrainJobWebhook, WithTheControllersRuntimesATrainJobIsJudgedWithItsRuntime) {
  Json runtime = P5Runtime();
  runtime["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
         ["containers"][0]["env"]
             .push_back(Json({{"name", "NCCL_PROTO"}, {"value", "fast"}}));
  const webhook::AdmitOptions options{.runtimes = Runtimes(runtime)};
  const auto validated = webhook::Admit(webhook::Endpoint::Validate, Request(TrainJob()),
                                        core::Policy::Defaults(), options);
  EXPECT_EQ(validated.result, webhook::AdmitResult::Denied);
  EXPECT_NE(validated.response.message.find("NCCL_PROTO"), std::string::npos);
  // Without them, the same TrainJob is admitted: its own spec is sound.
  EXPECT_NE(
      webhook::Admit(webhook::Endpoint::Validate, Request(TrainJob()), core::Policy::Defaults(), {})
          .result,
      webhook::AdmitResult::Denied);
}

TEST(TrainJobWebhook, ADeniedTrainJobNamesItsProblemAndItsGuideSection) {
  Json trainjob = TrainJob();
  trainjob["spec"]["trainer"]["env"].push_back(Json({{"name", "NCCL_PROTO"}, {"value", "fast"}}));
  const auto outcome =
      webhook::Admit(webhook::Endpoint::Validate, Request(trainjob), core::Policy::Defaults(), {});
  EXPECT_EQ(outcome.result, webhook::AdmitResult::Denied);
  EXPECT_NE(outcome.response.message.find("TrainJob ml/llama"), std::string::npos)
      << outcome.response.message;
  EXPECT_NE(outcome.response.message.find("(at /spec/trainer)"), std::string::npos);
}

TEST(TrainJobWebhook, ARuntimeIsWarnedAboutNeverDeniedNorChanged) {
  Json runtime = P5Runtime();
  runtime["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
         ["containers"][0]["env"]
             .push_back(Json({{"name", "NCCL_PROTO"}, {"value", "fast"}}));
  const auto validated =
      webhook::Admit(webhook::Endpoint::Validate, Request(runtime), core::Policy::Defaults(), {});
  EXPECT_EQ(validated.result, webhook::AdmitResult::Warned);
  EXPECT_TRUE(validated.response.allowed);
  bool proto = false;
  for (const std::string& warning : validated.response.warnings) {
    proto |= warning.find("every TrainJob using this runtime") != std::string::npos &&
             warning.find("NCCL_PROTO") != std::string::npos;
  }
  EXPECT_TRUE(proto);
  const auto mutated =
      webhook::Admit(webhook::Endpoint::Mutate, Request(runtime), core::Policy::Defaults(), {});
  EXPECT_EQ(mutated.result, webhook::AdmitResult::Skipped);
}

TEST(TrainJobWebhook, TheJobSetTheTrainerMakesIsLeftToItsOwner) {
  Json jobset = core::RenderTrainJob(TrainJob(), nullptr);
  jobset["metadata"]["ownerReferences"] = Json::parse(R"([{"apiVersion":
    "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "llama", "uid": "u",
    "controller": true}])");
  EXPECT_TRUE(core::ControlledByManagedJob(jobset));
  EXPECT_FALSE(core::IsManagedJob(jobset, core::WorkloadKind::JobSet));
  jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
        ["env"] = Json::array({Json({{"name", "NCCL_PROTO"}, {"value", "fast"}})});
  for (const auto endpoint : {webhook::Endpoint::Mutate, webhook::Endpoint::Validate}) {
    const auto outcome = webhook::Admit(endpoint, Request(jobset), core::Policy::Defaults(), {});
    EXPECT_TRUE(outcome.response.allowed);
    EXPECT_TRUE(outcome.response.patch.empty()) << "neither gated nor fixed";
  }
  // An owner reference whose `controller` is not a boolean reads as no controller, not an error.
  jobset["metadata"]["ownerReferences"][0]["controller"] = "yes";
  EXPECT_FALSE(core::ControlledByManagedJob(jobset));
  // A JobSet of its own is still a managed job.
  jobset["metadata"].erase("ownerReferences");
  EXPECT_TRUE(core::IsManagedJob(jobset, core::WorkloadKind::JobSet));
}

TEST(TrainJobCli, LintReadsTheRuntimeFromTheSameInput) {
  TempFile trainjob(TrainJob().dump());
  TempFile runtime(P5Runtime().dump());
  const CommandResult alone = RunCli({"lint", trainjob.path()});
  const CommandResult with = RunCli({"lint", trainjob.path(), runtime.path()});
  EXPECT_EQ(alone.out.find("efa-resources-missing"), std::string::npos) << alone.out;
  EXPECT_NE(with.out.find("efa-resources-missing TrainJob ml/llama at /spec/trainer"),
            std::string::npos)
      << with.out;
}

}  // namespace
}  // namespace ncclguard::test
