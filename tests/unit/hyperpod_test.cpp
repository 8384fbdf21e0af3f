// SageMaker HyperPod as it is: `ml.` instance types wherever one is read, the catalog learned
// from the nodes, HyperPodPyTorchJob through the rules and the webhook, HyperPod's node health
// in the gate, and the pod-level gate of kinds that cannot be suspended.
#include <gtest/gtest.h>

#include <variant>

#include "controllers/gate.h"
#include "controllers/training_job_reconciler.h"
#include "core/contract.h"
#include "core/errors.h"
#include "core/gate.h"
#include "core/hyperpod.h"
#include "core/policy.h"
#include "core/workload.h"
#include "tests/unit/controllers/fake_cluster.h"
#include "tests/unit/test_support.h"
#include "webhook/admission_handler.h"

namespace ncclguard::test {
namespace {

using controllers::MergePatch;
using core::Json;
using core::WorkloadKind;

const controllers::Timestamp kHyperPodNow =
    std::chrono::sys_days(std::chrono::year(2026) / 12 / 5) + std::chrono::hours(10);

// A pod on `instance_type` with one container of `gpus` GPUs and no EFA request.
Json PodOn(const std::string& instance_type, int gpus) {
  Json pod = CompliantPod();
  pod["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"] = instance_type;
  Json& resources = pod["spec"]["containers"][0]["resources"];
  resources["limits"].erase("vpc.amazonaws.com/efa");
  resources["requests"].erase("vpc.amazonaws.com/efa");
  resources["limits"]["nvidia.com/gpu"] = std::to_string(gpus);
  resources["requests"]["nvidia.com/gpu"] = std::to_string(gpus);
  return pod;
}

std::string AddedEfa(const core::Evaluation& evaluation) {
  const core::JsonPointer at("/spec/containers/0/resources/limits/vpc.amazonaws.com~1efa");
  return evaluation.fixed.contains(at) ? evaluation.fixed.at(at).get<std::string>() : "";
}

// A HyperPodPyTorchJob as AWS's SDK writes one: replicaSpecs list, nprocPerNode a string.
Json HyperPodJob(const std::string& name, int replicas, const std::string& instance_type = "",
                 const std::string& nproc = "8") {
  Json job = Yaml(R"(
apiVersion: sagemaker.amazonaws.com/v1
kind: HyperPodPyTorchJob
metadata: {namespace: team-a}
spec:
  runPolicy: {cleanPodPolicy: None, jobMaxRetryCount: 3}
  replicaSpecs:
    - name: pods
      template:
        spec:
          containers:
            - name: pytorch
              image: 123456789012.dkr.ecr.us-west-2.amazonaws.com/train@sha256:0000000000000000000000000000000000000000000000000000000000000000
              command: [hyperpodrun, --nnodes=2, --nproc-per-node=8, train.py]
              resources:
                limits: {nvidia.com/gpu: 8}
)");
  job["metadata"]["name"] = name;
  job["spec"]["nprocPerNode"] = nproc;
  job["spec"]["replicaSpecs"][0]["replicas"] = replicas;
  if (!instance_type.empty()) {
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["nodeSelector"]
       ["node.kubernetes.io/instance-type"] = instance_type;
  }
  return job;
}

// --- Instance types as clusters spell them -------------------------------------------------

TEST(InstanceTypeNames, TheMlPrefixAndCaseNameTheSameType) {
  EXPECT_EQ(core::NormalizeInstanceType("ml.p5.48xlarge"), "p5.48xlarge");
  EXPECT_EQ(core::NormalizeInstanceType("ML.P5.48XLARGE"), "p5.48xlarge");
  EXPECT_EQ(core::NormalizeInstanceType("p5.48xlarge"), "p5.48xlarge");
  // Only a prefix when a type follows it.
  EXPECT_EQ(core::NormalizeInstanceType("ml.large"), "ml.large");
  EXPECT_EQ(core::NormalizeInstanceType(""), "");
  EXPECT_EQ(core::InstanceFamily("ml.p5.48xlarge"), "p5");
  EXPECT_EQ(core::InstanceFamily("p6-b200.48xlarge"), "p6-b200");
  const core::Policy policy = core::Policy::Defaults();
  ASSERT_NE(policy.FindInstanceType("ml.p5.48xlarge"), nullptr);
  EXPECT_EQ(policy.FindInstanceType("ml.p5.48xlarge"), policy.FindInstanceType("p5.48xlarge"));
}

TEST(InstanceTypeNames, ANodeSelectorOnAnMlTypeGetsItsEfaDevicesAndTheMessageKeepsTheName) {
  const core::Evaluation result = Check(PodOn("ml.p5.48xlarge", 4));
  EXPECT_EQ(AddedEfa(result), "16");
  const auto findings = FindingsOf(result, "efa-resources-missing");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_NE(findings[0].message.find("on ml.p5.48xlarge"), std::string::npos)
      << findings[0].message;
  EXPECT_TRUE(FindingsOf(result, "instance-type-unknown").empty());
}

TEST(InstanceTypeNames, ARequiredNodeAffinityOnAnMlTypeCounts) {
  Json pod = PodOn("x", 8);
  pod["spec"].erase("nodeSelector");
  pod["spec"]["affinity"] = Yaml(R"(
nodeAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    nodeSelectorTerms:
      - matchExpressions:
          - {key: node.kubernetes.io/instance-type, operator: In, values: [ml.p5en.48xlarge]}
)");
  EXPECT_EQ(AddedEfa(Check(pod)), "16");
}

TEST(InstanceTypeNames, AMismatchedCountNamesTheTypeAsWritten) {
  Json pod = PodOn("ml.p5.48xlarge", 8);
  pod["spec"]["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"] = "8";
  pod["spec"]["containers"][0]["resources"]["requests"]["vpc.amazonaws.com/efa"] = "8";
  const auto findings = FindingsOf(Check(pod), "efa-count-mismatch");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_NE(findings[0].message.find("ml.p5.48xlarge (32 EFA / 8 GPUs)"), std::string::npos)
      << findings[0].message;
}

TEST(InstanceTypeNames, OneFamilyWhetherOrNotItIsSpelledWithMl) {
  Json job = HyperPodJob("mixed", 2, "ml.p5.48xlarge");
  job["spec"]["replicaSpecs"][1] = job["spec"]["replicaSpecs"][0];
  job["spec"]["replicaSpecs"][1]["name"] = "more";
  Json& selector = job["spec"]["replicaSpecs"][1]["template"]["spec"]["nodeSelector"];
  selector["node.kubernetes.io/instance-type"] = "p5.48xlarge";
  EXPECT_TRUE(FindingsOf(Check(job), "mixed-instance-families").empty());
  selector["node.kubernetes.io/instance-type"] = "ml.p4d.24xlarge";
  EXPECT_EQ(FindingsOf(Check(job), "mixed-instance-families").size(), 1u);
}

TEST(InstanceTypeNames, ThePolicysEntriesAcceptTheMlSpelling) {
  const core::Policy policy = core::ParsePolicy(
      "spec: {instanceTypes: [{name: ml.x9.48xlarge, efaDevices: 4, gpus: 8}], "
      "defaultInstanceType: ml.x9.48xlarge}");
  const core::InstanceType* type = policy.FindInstanceType("x9.48xlarge");
  ASSERT_NE(type, nullptr);
  EXPECT_EQ(type->name, "x9.48xlarge");
  EXPECT_EQ(type->source, core::CatalogSource::Policy);
  Json pod = PodOn("", 8);
  pod["spec"].erase("nodeSelector");
  EXPECT_EQ(AddedEfa(Check(pod, policy)), "4");
}

// --- The catalog ----------------------------------------------------------------------------

TEST(Catalog, TheBuiltInTypesAreSortedUniqueAndSane) {
  const auto types = core::BuiltInInstanceTypes();
  ASSERT_GE(types.size(), 20u);
  for (std::size_t i = 0; i < types.size(); ++i) {
    SCOPED_TRACE(types[i].name);
    EXPECT_EQ(types[i].name, core::NormalizeInstanceType(types[i].name));
    EXPECT_GE(types[i].gpus, 1);
    EXPECT_GE(types[i].efa_devices, 1) << "the catalog lists EFA types only";
    if (i > 0) {
      EXPECT_LT(types[i - 1].name, types[i].name);
    }
  }
  const core::Policy policy = core::Policy::Defaults();
  for (const char* name : {"p4de.24xlarge", "p5.4xlarge", "p6-b200.48xlarge", "g6e.48xlarge"}) {
    EXPECT_NE(policy.FindInstanceType(name), nullptr) << name;
  }
}

core::ObservedInstanceType Seen(const std::string& name, int gpus, int efa) {
  core::ObservedInstanceType type;
  type.name = name;
  type.gpus = gpus;
  type.efa_devices = efa;
  type.nodes = 1;
  return type;
}

TEST(Catalog, WhatTheNodesAdvertiseAddsTypesAndNeverLowersACount) {
  core::Policy policy =
      core::ParsePolicy("spec: {instanceTypes: [{name: p5en.48xlarge, efaDevices: 8, gpus: 8}]}");
  policy.Learn({Seen("ml.x9.48xlarge", 8, 4), Seen("ml.p5.48xlarge", 8, 16),
                Seen("p4d.24xlarge", 8, 8), Seen("p5en.48xlarge", 8, 16), Seen("m5.xlarge", 0, 0)});
  // A type no catalog knows: learned.
  ASSERT_NE(policy.FindInstanceType("x9.48xlarge"), nullptr);
  EXPECT_EQ(policy.FindInstanceType("x9.48xlarge")->efa_devices, 4);
  EXPECT_EQ(policy.FindInstanceType("x9.48xlarge")->source, core::CatalogSource::Observed);
  // Fewer than the built-in count: not lowered.
  EXPECT_EQ(policy.FindInstanceType("p5.48xlarge")->efa_devices, 32);
  // More: raised.
  EXPECT_EQ(policy.FindInstanceType("p4d.24xlarge")->efa_devices, 8);
  // The policy's entry stands.
  EXPECT_EQ(policy.FindInstanceType("p5en.48xlarge")->efa_devices, 8);
  // Nodes without GPUs teach nothing.
  EXPECT_EQ(policy.FindInstanceType("m5.xlarge"), nullptr);
  // A learned type's counts say where they come from.
  const auto findings = FindingsOf(
      Check(
          [] {
            Json pod = PodOn("x9.48xlarge", 8);
            pod["spec"]["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"] = "1";
            pod["spec"]["containers"][0]["resources"]["requests"]["vpc.amazonaws.com/efa"] = "1";
            return pod;
          }(),
          policy),
      "efa-count-mismatch");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_NE(findings[0].message.find("as its nodes advertise"), std::string::npos);
}

TEST(Catalog, TheObservedListReadsFromAnObjectItsStatusOrTheListAndRoundTrips) {
  std::vector<core::ObservedInstanceType> seen{Seen("ml.x9.48xlarge", 8, 4)};
  seen[0].node_names = {"a", "b"};
  seen[0].observed_time = "2026-12-05T10:00:00Z";
  const Json list = core::ObservedCatalogJson(seen);
  const Json object{{"apiVersion", "ncclguard.io/v1alpha1"},
                    {"kind", "NcclPolicy"},
                    {"status", {{"observedInstanceTypes", list}}}};
  for (const Json& form : {object, object["status"], list}) {
    const auto parsed = core::ParseObservedCatalog(form);
    ASSERT_EQ(parsed.size(), 1u) << form.dump();
    EXPECT_EQ(core::ObservedCatalogJson(parsed), list);
  }
  EXPECT_TRUE(core::ParseObservedCatalog(Json{{"kind", "NcclPolicy"}, {"spec", {}}}).empty());
  EXPECT_TRUE(core::ParseObservedCatalog(nullptr).empty());
}

TEST(Catalog, AnUnreadableObservedListNamesTheField) {
  const auto error = [](const Json& value) {
    try {
      core::ParseObservedCatalog(value);
    } catch (const core::PolicyError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error(Json::array({{{"name", "p5"}}})),
            "observedInstanceTypes[0].name: \"p5\" is not an instance type like p5.48xlarge");
  EXPECT_EQ(error(Json{{"status", {{"observedInstanceTypes", 5}}}}),
            "status.observedInstanceTypes: expected a list");
  EXPECT_EQ(error(Json::array({{{"name", "x.y"}, {"gpus", 65}}})),
            "observedInstanceTypes[0].gpus: must be between 0 and 64");
  EXPECT_EQ(error(Json::array({{{"name", "x.y"}, {"efaDevices", "32"}}})),
            "observedInstanceTypes[0].efaDevices: expected an integer");
  EXPECT_EQ(error(Json::array({{{"name", "x.y"}, {"nodeNames", {1}}}})),
            "observedInstanceTypes[0].nodeNames: expected strings");
  EXPECT_EQ(error("text"), "observed catalog: expected an NcclPolicy or a list");
}

TEST(Catalog, ALongObservedListIsReadInOnePassAndKeepsTenNamesAnEntry) {
  // 50,000 entries of 1,000 node names each would be 50 M strings if kept; ten are kept.
  Json names = Json::array();
  for (int i = 0; i < 1000; ++i) names.push_back("node-" + std::to_string(i));
  Json list = Json::array();
  for (int i = 0; i < 2000; ++i) {
    list.push_back({{"name", "t" + std::to_string(i) + ".48xlarge"},
                    {"gpus", 8},
                    {"efaDevices", 4},
                    {"nodeNames", names}});
  }
  const auto parsed = core::ParseObservedCatalog(list);
  ASSERT_EQ(parsed.size(), 2000u);
  EXPECT_EQ(parsed.back().node_names.size(), core::kMaxObservedNodeNames);
  core::Policy policy = core::Policy::Defaults();
  policy.Learn(parsed);
  EXPECT_NE(policy.FindInstanceType("t1999.48xlarge"), nullptr);
}

// --- HyperPodPyTorchJob ---------------------------------------------------------------------

TEST(HyperPodPyTorchJob, TheWorkloadModelReadsItsReplicaSpecList) {
  Json job = HyperPodJob("llama", 4, "ml.p5.48xlarge");
  job["spec"]["replicaSpecs"][1] = job["spec"]["replicaSpecs"][0];
  job["spec"]["replicaSpecs"][1]["name"] = "spare";
  job["spec"]["replicaSpecs"][1]["replicas"] = 1;
  const auto workload = core::ParseWorkload(job);
  ASSERT_TRUE(workload);
  EXPECT_EQ(workload->kind, WorkloadKind::HyperPodPyTorchJob);
  ASSERT_EQ(workload->templates.size(), 2u);
  EXPECT_EQ(workload->templates[0].role, "pods");
  EXPECT_EQ(workload->templates[0].pods, 4);
  EXPECT_EQ(workload->templates[0].ranks_per_pod, 8);  // "8", a string as HyperPod writes it
  EXPECT_EQ(workload->templates[1].pods, 1);
  job["spec"]["replicaSpecs"][0]["replicas"] = "4";
  EXPECT_THROW(core::ParseWorkload(job), core::InputError);
  job["spec"]["replicaSpecs"] = Json::array({5});
  EXPECT_THROW(core::ParseWorkload(job), core::InputError);
}

TEST(HyperPodPyTorchJob, TheRulesFixItsTemplatesAndCheckItsWorldSize) {
  Json job = HyperPodJob("llama", 2, "ml.p5.48xlarge");
  const core::Evaluation fixed = Check(job);
  const core::JsonPointer efa(
      "/spec/replicaSpecs/0/template/spec/containers/0/resources/limits/vpc.amazonaws.com~1efa");
  ASSERT_TRUE(fixed.fixed.contains(efa)) << fixed.patch.dump();
  EXPECT_EQ(fixed.fixed.at(efa), "32");
  // HyperPod's agent does the rendezvous: no MASTER_ADDR, no Service, no subdomain.
  EXPECT_TRUE(FindingsOf(fixed, "rendezvous-dns-missing").empty());
  EXPECT_TRUE(FindingsOf(fixed, "master-addr-unqualified").empty());

  // WORLD_SIZE against replicas x nprocPerNode: 2 x 8 = 16.
  Json& env = job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["env"];
  env = Json::array({{{"name", "WORLD_SIZE"}, {"value", "16"}}});
  EXPECT_TRUE(FindingsOf(Check(job), "world-size-mismatch").empty());
  env[0]["value"] = "12";
  const auto findings = FindingsOf(Check(job), "world-size-mismatch");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_NE(findings[0].message.find("must be 2 or 16"), std::string::npos) << findings[0].message;
}

TEST(HyperPodPyTorchJob, ImagesMustAgreeAcrossItsReplicaSpecs) {
  Json job = HyperPodJob("llama", 2, "ml.p5.48xlarge");
  job["spec"]["replicaSpecs"][1] = job["spec"]["replicaSpecs"][0];
  job["spec"]["replicaSpecs"][1]["name"] = "other";
  job["spec"]["replicaSpecs"][1]["template"]["spec"]["containers"][0]["image"] =
      "123456789012.dkr.ecr.us-west-2.amazonaws.com/train@sha256:"
      "1111111111111111111111111111111111111111111111111111111111111111";
  EXPECT_EQ(FindingsOf(Check(job), "image-mismatch").size(), 1u);
}

TEST(HyperPodPyTorchJob, TheWebhookMarksTheJobAndGatesItsPodsNotItsSpec) {
  Json job = HyperPodJob("llama", 2, "ml.p5.48xlarge");
  webhook::AdmissionRequest request;
  request.uid = "u";
  request.kind = {"sagemaker.amazonaws.com", "v1", "HyperPodPyTorchJob"};
  request.operation = "CREATE";
  request.namespace_ = "team-a";
  request.name = "llama";
  request.object = job;
  const auto outcome =
      webhook::Admit(webhook::Endpoint::Mutate, request, core::Policy::Defaults(), {});
  const Json marked = job.patch(outcome.response.patch);
  EXPECT_EQ(marked["metadata"]["annotations"][std::string(core::kGateAnnotation)], "pending");
  EXPECT_EQ(marked["spec"], job["spec"]) << "no suspend field to set";
}

// A pod as HyperPod's operator makes it: label HPJob=<job>.
Json HyperPodPod(const std::string& job, int index, bool gated) {
  Json pod = PodOn("ml.p5.48xlarge", 8);
  pod["metadata"]["namespace"] = "team-a";
  pod["metadata"]["name"] = job + "-pods-" + std::to_string(index);
  pod["metadata"]["labels"] = {{"HPJob", job}};
  pod["metadata"]["resourceVersion"] = "7";
  if (gated) {
    pod["spec"]["schedulingGates"] = Json::array({{{"name", core::kSchedulingGate}}});
  }
  return pod;
}

webhook::AdmissionOutcome MutatePod(Json pod, const core::Policy& policy) {
  webhook::AdmissionRequest request;
  request.uid = "u";
  request.kind = {"", "v1", "Pod"};
  request.operation = "CREATE";
  request.namespace_ = "team-a";
  request.name = pod["metadata"].value("name", "");
  request.object = std::move(pod);
  return webhook::Admit(webhook::Endpoint::Mutate, request, policy, {});
}

TEST(PodGate, TheWebhookGatesThePodsOfAKindThatCannotBeSuspendedOnce) {
  const Json pod = HyperPodPod("llama", 0, false);
  const auto outcome = MutatePod(pod, core::Policy::Defaults());
  const Json admitted = pod.patch(outcome.response.patch);
  EXPECT_TRUE(core::HasSchedulingGate(admitted, core::kSchedulingGate)) << admitted.dump();
  // The fixes still happen beside it.
  EXPECT_EQ(
      admitted.at(core::JsonPointer("/spec/containers/0/resources/limits/vpc.amazonaws.com~1efa")),
      "32");
  // Another gate is kept, ours added after it.
  Json with_other = pod;
  with_other["spec"]["schedulingGates"] = Json::array({{{"name", "example.com/other"}}});
  const Json both =
      with_other.patch(MutatePod(with_other, core::Policy::Defaults()).response.patch);
  EXPECT_EQ(both["spec"]["schedulingGates"].size(), 2u);
  // Once is enough.
  const Json gated = HyperPodPod("llama", 0, true);
  const Json again = gated.patch(MutatePod(gated, core::Policy::Defaults()).response.patch);
  EXPECT_EQ(again["spec"]["schedulingGates"].size(), 1u);
}

TEST(PodGate, NeverForPodsKueueHoldsNorWithTheGateOffNorForOtherPods) {
  Json queued = HyperPodPod("llama", 0, false);
  queued["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "hyperpod-ns-team-a-localqueue";
  Json kueue_gated = HyperPodPod("llama", 1, false);
  kueue_gated["spec"]["schedulingGates"] = Json::array({{{"name", "kueue.x-k8s.io/admission"}}});
  Json kubeflow = HyperPodPod("llama", 2, false);
  kubeflow["metadata"]["labels"] = {{"training.kubeflow.org/job-name", "llama"}};
  for (const Json& pod : {queued, kueue_gated, kubeflow}) {
    const Json admitted = pod.patch(MutatePod(pod, core::Policy::Defaults()).response.patch);
    EXPECT_FALSE(core::HasSchedulingGate(admitted, core::kSchedulingGate)) << pod.dump();
  }
  core::Policy off = core::Policy::Defaults();
  off.gate.enabled = false;
  const Json pod = HyperPodPod("llama", 3, false);
  EXPECT_FALSE(core::HasSchedulingGate(pod.patch(MutatePod(pod, off).response.patch),
                                       core::kSchedulingGate));
}

class HyperPodGate : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_.AddNamespace("team-a", true);
    Json job = HyperPodJob("llama", 2, "ml.p5.48xlarge");
    job["metadata"]["annotations"][std::string(core::kGateAnnotation)] = "pending";
    cluster_.AddJob(job);
    cluster_.AddPod(HyperPodPod("llama", 0, true));
    cluster_.AddPod(HyperPodPod("llama", 1, true));
  }
  controllers::ReconcileResult Reconcile() {
    return controllers::ReconcileTrainingJob(key_, cluster_, kHyperPodNow);
  }
  std::vector<MergePatch> PodPatches(const controllers::ReconcileResult& result) {
    std::vector<MergePatch> out;
    for (const auto& action : result.actions) {
      const auto* patch = std::get_if<MergePatch>(&action);
      if (patch != nullptr && patch->target.kind == "Pod") out.push_back(*patch);
    }
    return out;
  }
  Json Preflight() {
    for (const Json& c : cluster_.JobObject(key_)["status"]["conditions"]) {
      if (c["type"] == "NcclPreflight") return c;
    }
    return nullptr;
  }

  FakeCluster cluster_;
  const controllers::JobKey key_{WorkloadKind::HyperPodPyTorchJob, "team-a", "llama"};
};

TEST_F(HyperPodGate, PodsStayGatedUntilEnoughNodesAreValidatedThenAllAreReleased) {
  cluster_.AddNode("hp-0", "ml.p5.48xlarge", "Pass");
  auto held = Reconcile();
  EXPECT_TRUE(PodPatches(held).empty());
  ASSERT_EQ(cluster_.Apply(held.actions), 0);
  EXPECT_EQ(Preflight()["status"], "False");
  EXPECT_NE(Preflight()["message"].get<std::string>().find("1/2 ml.p5.48xlarge nodes validated"),
            std::string::npos)
      << Preflight().dump();

  cluster_.AddNode("hp-1", "ml.p5.48xlarge", "Pass");
  const auto released = Reconcile();
  const auto patches = PodPatches(released);
  ASSERT_EQ(patches.size(), 2u);
  for (const MergePatch& p : patches) {
    EXPECT_EQ(p.patch["spec"]["schedulingGates"], Json::array());
    EXPECT_EQ(p.patch["metadata"]["resourceVersion"], "7");
  }
  ASSERT_EQ(cluster_.Apply(released.actions), 0);
  EXPECT_EQ(Preflight()["status"], "False") << "the release alone; the condition next";
  ASSERT_EQ(cluster_.Apply(Reconcile().actions), 0);
  EXPECT_EQ(Preflight()["status"], "True");
  const Json& job = cluster_.JobObject(key_);
  EXPECT_EQ(job["metadata"]["annotations"][std::string(core::kGateAnnotation)], "admitted");
  EXPECT_FALSE(job["spec"].contains("suspend"));
  for (int i = 0; i < 2; ++i) {
    EXPECT_FALSE(core::HasSchedulingGate(
        cluster_.PodObject("team-a", "llama-pods-" + std::to_string(i)), core::kSchedulingGate));
  }
  // A pod the operator makes again later (a restart) is let go at once.
  cluster_.AddPod(HyperPodPod("llama", 2, true));
  EXPECT_EQ(PodPatches(Reconcile()).size(), 1u);
}

TEST_F(HyperPodGate, ANodeHyperPodMarksUnhealthyDoesNotCountAndTheHoldSaysWhy) {
  cluster_.AddNode("hp-0", "ml.p5.48xlarge", "Pass");
  cluster_.AddNode("hp-1", "ml.p5.48xlarge", "Pass");
  cluster_.NodeObject("hp-1")["metadata"]["labels"][std::string(core::kHyperPodHealthLabel)] =
      "UnschedulablePendingReplacement";
  ASSERT_EQ(cluster_.Apply(Reconcile().actions), 0);
  const std::string message = Preflight()["message"];
  EXPECT_NE(message.find("node hp-1 passed validation but HyperPod marks it "
                         "UnschedulablePendingReplacement"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("#sagemaker-hyperpod"), std::string::npos) << message;

  // Its deep health check running, or its taint: not counted either.
  Json& labels = cluster_.NodeObject("hp-1")["metadata"]["labels"];
  labels[std::string(core::kHyperPodHealthLabel)] = "Schedulable";
  labels[std::string(core::kHyperPodDeepHealthLabel)] = "InProgress";
  EXPECT_TRUE(PodPatches(Reconcile()).empty());
  labels[std::string(core::kHyperPodDeepHealthLabel)] = "Passed";
  cluster_.NodeObject("hp-1")["spec"]["taints"] = Json::array({{{"key", core::kHyperPodHealthLabel},
                                                                {"value", "Unschedulable"},
                                                                {"effect", "NoSchedule"}}});
  EXPECT_TRUE(PodPatches(Reconcile()).empty());

  // The policy may ignore HyperPod's node health.
  cluster_.policy().gate.hyperpod.node_health = false;
  EXPECT_EQ(PodPatches(Reconcile()).size(), 2u);
}

TEST_F(HyperPodGate, AJobThatIsNotHeldHasItsGatedPodsReleasedAtOnce) {
  // Queued by Kueue (never marked pending) or created before ncclguard: nothing holds it.
  cluster_.JobObject(key_)["metadata"]["annotations"].erase(std::string(core::kGateAnnotation));
  EXPECT_EQ(PodPatches(Reconcile()).size(), 2u);
}

TEST(HyperPodHealth, EachSignalAndNoneOnOtherNodes) {
  const auto node = [](const std::string& health, const std::string& deep) {
    Json n{{"metadata", {{"name", "n"}, {"labels", Json::object()}}}};
    if (!health.empty()) n["metadata"]["labels"][std::string(core::kHyperPodHealthLabel)] = health;
    if (!deep.empty()) n["metadata"]["labels"][std::string(core::kHyperPodDeepHealthLabel)] = deep;
    return n;
  };
  const core::HyperPodHealthPolicy all;
  EXPECT_FALSE(core::HyperPodUnhealthy(node("", ""), all));
  EXPECT_FALSE(core::HyperPodUnhealthy(node("Schedulable", "Passed"), all));
  EXPECT_EQ(core::HyperPodUnhealthy(node("UnschedulablePendingReboot", ""), all),
            "HyperPod marks it UnschedulablePendingReboot");
  EXPECT_EQ(core::HyperPodUnhealthy(node("Schedulable", "Failed"), all),
            "its HyperPod deep health check Failed");
  EXPECT_EQ(core::HyperPodUnhealthy(node("", "InProgress"), all),
            "its HyperPod deep health check is InProgress");
  EXPECT_FALSE(core::HyperPodUnhealthy(node("", "InProgress"), {.deep_health_check = false}));
  // A PreferNoSchedule taint keeps nothing off the node.
  Json soft = node("", "");
  soft["spec"]["taints"] = Json::array({{{"key", core::kHyperPodHealthLabel},
                                         {"value", "Unschedulable"},
                                         {"effect", "PreferNoSchedule"}}});
  EXPECT_FALSE(core::HyperPodUnhealthy(soft, all));
}

TEST(HyperPodHealth, ThePolicyTurnsEitherSignalOff) {
  const core::Policy policy =
      core::ParsePolicy("spec: {gate: {hyperPod: {nodeHealth: false, deepHealthCheck: true}}}");
  EXPECT_FALSE(policy.gate.hyperpod.node_health);
  EXPECT_TRUE(policy.gate.hyperpod.deep_health_check);
  EXPECT_THROW(core::ParsePolicy("spec: {gate: {hyperPod: {deep: false}}}"), core::PolicyError);
  EXPECT_THROW(core::ParsePolicy("spec: {gate: {hyperPod: [true]}}"), core::PolicyError);
}

TEST(GateDemand, AnMlTypeIsSizedFromTheCatalog) {
  const auto demands =
      controllers::NodeDemands(HyperPodJob("llama", 3, "ml.p5.48xlarge"), core::Policy::Defaults());
  ASSERT_EQ(demands.size(), 1u);
  EXPECT_EQ(demands[0].instance_type, "ml.p5.48xlarge");  // as the nodes are labelled
  EXPECT_EQ(demands[0].nodes, 3);
}

// --- The CLI --------------------------------------------------------------------------------

TEST(CatalogFlag, LintAndFixSizeATypeTheClusterLearned) {
  const TempFile manifest(PodOn("x9.48xlarge", 4).dump(), ".json");
  const TempFile catalog(R"(apiVersion: ncclguard.io/v1alpha1
kind: NcclPolicy
metadata: {name: default}
spec: {}
status:
  observedInstanceTypes:
    - {name: ml.x9.48xlarge, gpus: 8, efaDevices: 8, nodes: 2, nodeNames: [a, b],
       observedTime: "2026-12-05T10:00:00Z"}
)");
  const CommandResult without = RunCli({"lint", manifest.path()});
  EXPECT_EQ(without.out.find("efa-resources-missing"), std::string::npos) << without.out;
  const CommandResult with = RunCli({"lint", "--catalog", catalog.path(), manifest.path()});
  EXPECT_NE(with.out.find("efa-resources-missing"), std::string::npos) << with.out << with.err;
  const CommandResult fixed = RunCli({"fix", "--catalog", catalog.path(), manifest.path()});
  EXPECT_EQ(fixed.exit_code, 0) << fixed.err;
  EXPECT_NE(fixed.out.find("\"vpc.amazonaws.com/efa\": \"4\""), std::string::npos) << fixed.out;

  // A jsonpath of the list reads the same.
  const TempFile list(R"([{"name":"x9.48xlarge","gpus":8,"efaDevices":8}])", ".json");
  const CommandResult from_list = RunCli({"lint", "--catalog", list.path(), manifest.path()});
  EXPECT_NE(from_list.out.find("efa-resources-missing"), std::string::npos) << from_list.err;

  const TempFile broken("status: {observedInstanceTypes: [{name: x9}]}\n");
  const CommandResult bad = RunCli({"lint", "--catalog", broken.path(), manifest.path()});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find(broken.path() + ": status.observedInstanceTypes[0].name"),
            std::string::npos)
      << bad.err;
}

TEST(CatalogFlag, AHyperPodJobThroughLintAndFix) {
  const TempFile manifest(HyperPodJob("llama", 2, "ml.p5.48xlarge").dump(), ".json");
  const CommandResult lint = RunCli({"lint", manifest.path()});
  EXPECT_NE(lint.out.find("efa-resources-missing"), std::string::npos) << lint.out << lint.err;
  EXPECT_NE(lint.out.find("ml.p5.48xlarge"), std::string::npos) << lint.out;
  const CommandResult fixed = RunCli({"fix", manifest.path()});
  EXPECT_EQ(fixed.exit_code, 0) << fixed.err;
  EXPECT_NE(fixed.out.find("\"vpc.amazonaws.com/efa\": \"32\""), std::string::npos) << fixed.out;
  // Fixed once, fixed for good.
  const TempFile again(fixed.out, ".json");
  const CommandResult twice = RunCli({"fix", again.path()});
  EXPECT_EQ(twice.out, fixed.out);
}

}  // namespace
}  // namespace ncclguard::test
