#include <gtest/gtest.h>

#include "core/placement_request.h"
#include "core/trainjob.h"
#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kPlacementRuleId = "topology-placement";
const std::string kLayer3 = "topology.k8s.aws/network-node-layer-3";
const std::string kLayer4 = "topology.k8s.aws/network-node-layer-4";
const std::string kUltra = "topology.k8s.aws/ultraserver-id";

// The EKS Topology of the AWS guide: the three network layers, then the host.
std::vector<std::string> EksTopology() {
  return {"topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2", kLayer3,
          "kubernetes.io/hostname"};
}

core::PlacementRequest QueuedRequest(std::vector<std::string> levels = EksTopology(),
                                     core::PlacementMode mode = core::PlacementMode::Preferred) {
  core::PlacementRequest request;
  request.mode = mode;
  request.queued_by_kueue = true;
  request.kueue_levels = std::move(levels);
  return request;
}

core::Json QueuedJob(int workers = 3) {
  core::Json job = PyTorchJob(workers, "p5.48xlarge");
  job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "gpus";
  return job;
}

core::Evaluation PlaceJob(const core::Json& job, const core::PlacementRequest* request,
                          const core::Policy& policy = core::Policy::Defaults()) {
  return core::Evaluate(job, policy,
                        {.job_rules = false,
                         .check_rules = false,
                         .placement = request,
                         .only_rule = kPlacementRuleId});
}

// A policy that learned from the nodes where p5 and p6-b200 nodes sit: three layers on p5, four
// on p6-b200 (whose UltraServer holds `ultra_nodes`).
core::Policy LearnedPolicy(int ultra_nodes = 0) {
  core::Policy policy = core::Policy::Defaults();
  core::ObservedInstanceType p5 = ObservedType("p5.48xlarge", 8, 32, 4);
  p5.topology_levels = {"topology.k8s.aws/network-node-layer-1",
                        "topology.k8s.aws/network-node-layer-2", kLayer3};
  core::ObservedInstanceType b200 = ObservedType("p6-b200.48xlarge", 8, 8, 4);
  b200.topology_levels = p5.topology_levels;
  b200.topology_levels.push_back(kLayer4);
  b200.ultra_server = ultra_nodes > 0;
  b200.ultra_server_nodes = ultra_nodes;
  policy.Learn({p5, b200});
  return policy;
}

const core::Json& Annotations(const core::Json& job, const std::string& role) {
  return job["spec"]["pytorchReplicaSpecs"][role]["template"]["metadata"]["annotations"];
}

TEST(TopologyPlacement,
     AQueuedJobAsksKueueForOneBlockAtTheDeepestLayerWithMasterAndWorkersGrouped) {
  const core::PlacementRequest request = QueuedRequest();
  const core::Evaluation result = PlaceJob(QueuedJob(), &request);

  const auto findings = FindingsOf(result, kPlacementRuleId);
  ASSERT_EQ(findings.size(), 2u) << Dump(result);
  EXPECT_EQ(findings[0].level, core::Level::Fix);
  EXPECT_TRUE(Mentions(findings[0].message,
                       "Kueue asked to place the job's 4 pods in one network-node-layer-3 block "
                       "(kueue.x-k8s.io/podset-preferred-topology: " +
                           kLayer3 + ", with its other pod set)"));
  EXPECT_TRUE(LinksTo(findings[0], "advanced-tuning"));
  for (const char* role : {"Master", "Worker"}) {
    const core::Json& annotations = Annotations(result.fixed, role);
    EXPECT_EQ(annotations["kueue.x-k8s.io/podset-preferred-topology"], kLayer3) << role;
    EXPECT_EQ(annotations["kueue.x-k8s.io/podset-group-name"], "ncclguard-ranks") << role;
  }
  // Nothing else of the job changed: the other fixes happen to its pods.
  core::Json without = result.fixed;
  for (const char* role : {"Master", "Worker"}) {
    without["spec"]["pytorchReplicaSpecs"][role]["template"].erase("metadata");
  }
  EXPECT_EQ(without, QueuedJob());
}

TEST(TopologyPlacement, RequiredModeAsksForTheRequiredForm) {
  const core::PlacementRequest request =
      QueuedRequest(EksTopology(), core::PlacementMode::Required);
  const core::Evaluation result = PlaceJob(QueuedJob(), &request);
  EXPECT_EQ(Annotations(result.fixed, "Worker")["kueue.x-k8s.io/podset-required-topology"], kLayer3)
      << Dump(result);
  EXPECT_FALSE(
      Annotations(result.fixed, "Worker").contains("kueue.x-k8s.io/podset-preferred-topology"));
}

TEST(TopologyPlacement, IsIdempotent) {
  const core::PlacementRequest request = QueuedRequest();
  const core::Evaluation first = PlaceJob(QueuedJob(), &request);
  const core::Evaluation second = PlaceJob(first.fixed, &request);
  EXPECT_TRUE(FindingsOf(second, kPlacementRuleId).empty()) << Dump(second);
  EXPECT_TRUE(second.patch.empty());
  EXPECT_EQ(second.fixed, first.fixed);
}

TEST(TopologyPlacement, TheUsersOwnRequestWinsOnItsPodSetWhichThenIsNotGrouped) {
  core::Json job = QueuedJob();
  job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"]
     ["kueue.x-k8s.io/podset-unconstrained-topology"] = "true";
  const core::PlacementRequest request = QueuedRequest();
  const core::Evaluation result = PlaceJob(job, &request);

  const core::Json& worker = Annotations(result.fixed, "Worker");
  EXPECT_EQ(worker, core::Json({{"kueue.x-k8s.io/podset-unconstrained-topology", "true"}}));
  const core::Json& master = Annotations(result.fixed, "Master");
  EXPECT_EQ(master["kueue.x-k8s.io/podset-preferred-topology"], kLayer3);
  EXPECT_FALSE(master.contains("kueue.x-k8s.io/podset-group-name")) << Dump(result);
}

TEST(TopologyPlacement, TheDeepestLayerIsTheTypesOwnAtDepthFourAndThree) {
  std::vector<std::string> levels = EksTopology();
  levels.insert(levels.begin() + 3, kLayer4);
  const core::PlacementRequest request = QueuedRequest(levels);
  const core::Policy policy = LearnedPolicy();
  // A JobSet of one replicated job (no second pod set to group with), per instance type.
  for (const auto& [type, expected] :
       {std::pair{std::string("p6-b200.48xlarge"), kLayer4}, {"p5.48xlarge", kLayer3}}) {
    core::Json jobset = Yaml(R"(
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: train, namespace: ml, labels: {kueue.x-k8s.io/queue-name: gpus}}
spec:
  replicatedJobs:
    - name: workers
      replicas: 1
      template:
        spec:
          parallelism: 4
          completions: 4
          template:
            spec:
              containers: [{name: train, image: train:1, resources: {limits: {nvidia.com/gpu: 8}}}]
)");
    jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"]
          [kInstanceTypeKey] = type;
    const core::Evaluation result = PlaceJob(jobset, &request, policy);
    EXPECT_EQ(result.fixed.at(core::JsonPointer("/spec/replicatedJobs/0/template/spec/template/"
                                                "metadata/annotations/kueue.x-k8s.io~1podset-"
                                                "preferred-topology")),
              expected)
        << type << Dump(result);
  }
}

TEST(TopologyPlacement, AJobThatFitsOneUltraServerIsAskedForIt) {
  std::vector<std::string> levels = EksTopology();
  levels.insert(levels.begin() + 3, kUltra);
  const core::Policy policy = LearnedPolicy(18);
  const core::PlacementRequest request = QueuedRequest(levels);
  // One pod set of 16 pods on p6-b200: fits an UltraServer of 18; 20 pods do not.
  for (const auto& [workers, expected] : {std::pair{16, kUltra}, {20, kLayer3}}) {
    core::Json job = QueuedJob();
    job["spec"]["pytorchReplicaSpecs"].erase("Master");
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = workers;
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"]
       [kInstanceTypeKey] = "p6-b200.48xlarge";
    const core::Evaluation result = PlaceJob(job, &request, policy);
    EXPECT_EQ(Annotations(result.fixed, "Worker")["kueue.x-k8s.io/podset-preferred-topology"],
              expected)
        << workers << Dump(result);
  }
}

TEST(TopologyPlacement, NothingIsAskedOffWithoutATopologyOrOfASinglePod) {
  const core::PlacementRequest off = QueuedRequest(EksTopology(), core::PlacementMode::Off);
  EXPECT_TRUE(PlaceJob(QueuedJob(), &off).patch.empty());
  const core::PlacementRequest no_topology = QueuedRequest({});
  EXPECT_TRUE(PlaceJob(QueuedJob(), &no_topology).patch.empty());
  EXPECT_TRUE(PlaceJob(QueuedJob(), nullptr).patch.empty());
  core::PlacementRequest not_queued = QueuedRequest();
  not_queued.queued_by_kueue = false;
  EXPECT_TRUE(PlaceJob(QueuedJob(), &not_queued).patch.empty());
  // Only the hostname level: no network block to ask for.
  const core::PlacementRequest hosts = QueuedRequest({"kubernetes.io/hostname"});
  EXPECT_TRUE(PlaceJob(QueuedJob(), &hosts).patch.empty());
  core::Json single = QueuedJob();
  single["spec"]["pytorchReplicaSpecs"].erase("Worker");
  const core::PlacementRequest request = QueuedRequest();
  EXPECT_TRUE(PlaceJob(single, &request).patch.empty());
}

TEST(TopologyPlacement, AnAdminsOwnTopologyIsAskedAtItsDeepestLevelButTheHost) {
  const core::PlacementRequest request =
      QueuedRequest({"example.com/block", "example.com/rack", "kubernetes.io/hostname"});
  const core::Evaluation result = PlaceJob(QueuedJob(), &request);
  EXPECT_EQ(Annotations(result.fixed, "Worker")["kueue.x-k8s.io/podset-preferred-topology"],
            "example.com/rack")
      << Dump(result);
}

TEST(TopologyPlacement, ATrainJobsRequestGoesInNcclguardsRuntimePatchOnTheTrainerNodeOnly) {
  const core::Json runtime = Yaml(R"(
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: torch-p5}
spec:
  mlPolicy: {numNodes: 1, torch: {}}
  template:
    spec:
      replicatedJobs:
        - name: dataset-initializer
          template:
            spec:
              template:
                spec:
                  containers: [{name: dataset-initializer, image: init:1}]
        - name: node
          template:
            spec:
              template:
                spec:
                  nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
                  containers:
                    - name: node
                      image: pytorch/pytorch:2.10.0
                      resources: {limits: {nvidia.com/gpu: 8}}
)");
  const core::Json trainjob = Yaml(R"(
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: llama, namespace: ml, labels: {kueue.x-k8s.io/queue-name: gpus}}
spec:
  runtimeRef: {name: torch-p5}
  trainer: {numNodes: 4}
)");
  const core::PlacementRequest request = QueuedRequest();
  const core::Evaluation result = core::Evaluate(
      trainjob, core::Policy::Defaults(),
      {.job_rules = false,
       .check_rules = false,
       .runtimes = [&](const core::RuntimeRef&, std::string_view) -> std::optional<core::Json> {
         return runtime;
       },
       .placement = &request});
  const core::Json& patches = result.fixed["spec"]["runtimePatches"];
  ASSERT_TRUE(patches.is_array()) << Dump(result);
  const core::Json& jobs =
      patches.back()["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"];
  ASSERT_EQ(jobs.size(), 1u) << Dump(result);
  EXPECT_EQ(jobs[0]["name"], "node");
  EXPECT_EQ(jobs[0]["template"]["spec"]["template"]["metadata"]["annotations"],
            core::Json({{"kueue.x-k8s.io/podset-preferred-topology", kLayer3}}))
      << Dump(result);
}

// --- A pod of a job no queue holds: a pod affinity among the job's pods.

core::PlacementRequest PodRequest(core::PlacementMode mode = core::PlacementMode::Preferred) {
  core::PlacementRequest request;
  request.mode = mode;
  request.job_label = "training.kubeflow.org/job-name";
  request.job_name = "llama";
  request.job = "PyTorchJob llama";
  request.job_pods = 4;
  return request;
}

core::Evaluation PlacePod(const core::Json& pod, const core::PlacementRequest* request,
                          const core::Policy& policy = LearnedPolicy()) {
  return core::Evaluate(pod, policy, {.check_rules = false, .placement = request});
}

TEST(TopologyPlacement, APodOfAJobGetsAPreferredAffinityWithItsJobsPodsOnTheClosestBlock) {
  const core::PlacementRequest request = PodRequest();
  const core::Evaluation result = PlacePod(CompliantPod(), &request);
  const auto findings = FindingsOf(result, kPlacementRuleId);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  EXPECT_EQ(findings[0].path, "/spec/affinity/podAffinity");
  EXPECT_TRUE(Mentions(findings[0].message,
                       "preferred pod affinity with the 4 pods of PyTorchJob llama in one "
                       "network-node-layer-3 block (topologyKey " +
                           kLayer3 + ")"));
  EXPECT_EQ(result.fixed["spec"]["affinity"], core::Json::parse(R"({"podAffinity": {
      "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
        "labelSelector": {"matchLabels": {"training.kubeflow.org/job-name": "llama"}},
        "topologyKey": "topology.k8s.aws/network-node-layer-3"}}]}})"))
      << Dump(result);
  // Idempotent: the pod's own affinity now stands.
  EXPECT_TRUE(FindingsOf(PlacePod(result.fixed, &request), kPlacementRuleId).empty());
}

TEST(TopologyPlacement, RequiredModeGivesAPodTheRequiredAffinityKeepingItsNodeAffinity) {
  core::Json pod = CompliantPod();
  pod["spec"]["affinity"] = RequiredNodeAffinity(
      "      - matchExpressions: [{key: node.kubernetes.io/instance-type, operator: In, values: "
      "[p5.48xlarge]}]\n");
  const core::PlacementRequest request = PodRequest(core::PlacementMode::Required);
  const core::Evaluation result = PlacePod(pod, &request);
  const core::Json& affinity = result.fixed["spec"]["affinity"];
  EXPECT_EQ(affinity["nodeAffinity"], pod["spec"]["affinity"]["nodeAffinity"]);
  EXPECT_EQ(
      affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"],
      kLayer3)
      << Dump(result);
}

TEST(TopologyPlacement, APodsOwnPlacementWinsAndAQueuedOrSmallOrUnlabelledJobGetsNothing) {
  const core::PlacementRequest request = PodRequest();
  for (
      const std::string& own :
      {std::string(
           R"({"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}]}}})"),
       std::string(
           R"({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]})"),
       std::string(R"({"nodeSelector": {"topology.k8s.aws/network-node-layer-3": "nn-a"}})")}) {
    core::Json pod = CompliantPod();
    const core::Json parts = core::Json::parse(own);
    for (const auto& [key, value] : parts.items()) {
      if (key == "nodeSelector") {
        pod["spec"]["nodeSelector"].update(value);
      } else {
        pod["spec"][key] = value;
      }
    }
    EXPECT_TRUE(PlacePod(pod, &request).patch.empty()) << own;
  }
  core::PlacementRequest queued = request;
  queued.queued_by_kueue = true;
  EXPECT_TRUE(PlacePod(CompliantPod(), &queued).patch.empty());
  core::PlacementRequest small = request;
  small.job_pods = 1;
  EXPECT_TRUE(PlacePod(CompliantPod(), &small).patch.empty());
  // Nodes that carry no layer: nothing to ask on.
  EXPECT_TRUE(PlacePod(CompliantPod(), &request, core::Policy::Defaults()).patch.empty());
}

}  // namespace
}  // namespace ncclguard::test
