// The operator's pure building blocks: keys, timestamps, conditions, rendezvous names, node
// demands, policy objects.
#include <gtest/gtest.h>

#include "controllers/conditions.h"
#include "controllers/gate.h"
#include "controllers/job_kind.h"
#include "controllers/json_fields.h"
#include "controllers/policy_object.h"
#include "controllers/timestamps.h"
#include "core/errors.h"
#include "core/rendezvous.h"
#include "tests/unit/controllers/fake_cluster.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

using namespace controllers;
using core::ConditionStyle;
using core::WorkloadKind;

const Timestamp kT0 =
    std::chrono::sys_days(std::chrono::year(2026) / 12 / 2) + std::chrono::hours(14);

TEST(JobKey, RoundTripsAndRejectsJunk) {
  const JobKey key{WorkloadKind::MpiJob, "team-a", "bert"};
  EXPECT_EQ(key.ToString(), "MPIJob/team-a/bert");
  EXPECT_EQ(JobKey::Parse("MPIJob/team-a/bert"), key);
  EXPECT_EQ(JobKey::Parse("Job/ns/x")->kind, WorkloadKind::BatchJob);
  for (const char* bad : {"", "PyTorchJob", "PyTorchJob/ns", "PyTorchJob//x", "Deployment/ns/x",
                          "PyTorchJob/ns/a/b"}) {
    EXPECT_FALSE(JobKey::Parse(bad)) << bad;
  }
}

TEST(ManagedKinds, RecognisesJobsByGroupAndKind) {
  using core::ManagedKindOf;
  EXPECT_EQ(ManagedKindOf(Json{{"apiVersion", "kubeflow.org/v2beta1"}, {"kind", "MPIJob"}}),
            WorkloadKind::MpiJob);
  EXPECT_EQ(ManagedKindOf(Json{{"apiVersion", "batch/v1"}, {"kind", "Job"}}),
            WorkloadKind::BatchJob);
  EXPECT_FALSE(ManagedKindOf(Json{{"apiVersion", "other.io/v1"}, {"kind", "Job"}}));
  EXPECT_FALSE(ManagedKindOf(Json{{"apiVersion", "v1"}, {"kind", "Pod"}}));  // fixed, not managed
  EXPECT_FALSE(ManagedKindOf(Json::array()));
  EXPECT_FALSE(ManagedKindOf(Json{{"apiVersion", 1}, {"kind", "Job"}}));
}

TEST(TruncateUtf8, NeverTearsASequence) {
  EXPECT_EQ(TruncateUtf8("short", 10), "short");
  const std::string dashes = "ab\u2014\u2014\u2014";  // 2 + 3 x 3 bytes
  for (std::size_t max = 3; max <= dashes.size(); ++max) {
    const std::string cut = TruncateUtf8(dashes, max);
    EXPECT_LE(cut.size(), std::max<std::size_t>(max, 3));
    EXPECT_NO_THROW((void)Json(cut).dump()) << max;
  }
}

TEST(Timestamps, FormatAndParse) {
  EXPECT_EQ(FormatTime(kT0), "2026-12-02T14:00:00Z");
  EXPECT_EQ(FormatMicroTime(kT0), "2026-12-02T14:00:00.000000Z");
  EXPECT_EQ(ParseTime("2026-12-02T14:00:00Z"), kT0);
  EXPECT_EQ(ParseTime("2026-12-02T14:00:00.123456Z"), kT0);
  EXPECT_EQ(ParseTime("2026-12-02T16:00:00+02:00"), kT0);
  for (const char* bad : {"", "yesterday", "2026-13-02T14:00:00Z", "2026-12-02 14:00:00Z",
                          "2026-12-02T14:00:00", "2026-02-30T00:00:00Z"}) {
    EXPECT_FALSE(ParseTime(bad)) << bad;
  }
}

TEST(Conditions, TransitionTimeMovesOnlyWhenStatusChanges) {
  Json job{{"status", {{"conditions", {{{"type", "Running"}, {"status", "True"}}}}}}};
  const Condition held{"NcclPreflight", "False", "InsufficientValidatedNodes", "1/2", {}};
  auto list = WithCondition(job, held, ConditionStyle::Kubeflow, kT0);
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0]["type"], "Running");  // the operator's own condition kept
  EXPECT_EQ((*list)[1]["lastTransitionTime"], "2026-12-02T14:00:00Z");
  EXPECT_EQ((*list)[1]["lastUpdateTime"], "2026-12-02T14:00:00Z");
  job["status"]["conditions"] = *list;

  EXPECT_FALSE(WithCondition(job, held, ConditionStyle::Kubeflow, kT0 + std::chrono::hours(1)));

  Condition progressed = held;
  progressed.message = "2/3";
  list = WithCondition(job, progressed, ConditionStyle::Kubeflow, kT0 + std::chrono::hours(1));
  ASSERT_TRUE(list);
  EXPECT_EQ((*list)[1]["lastTransitionTime"], "2026-12-02T14:00:00Z");
  EXPECT_EQ((*list)[1]["lastUpdateTime"], "2026-12-02T15:00:00Z");
  job["status"]["conditions"] = *list;

  list = WithCondition(job, {"NcclPreflight", "True", "ValidatedNodesAvailable", "ok", {}},
                       ConditionStyle::Batch, kT0 + std::chrono::hours(2));
  EXPECT_EQ((*list)[1]["lastTransitionTime"], "2026-12-02T16:00:00Z");
  EXPECT_EQ((*list)[1]["lastProbeTime"], "2026-12-02T16:00:00Z");
}

TEST(Conditions, ReasonsAreUpperCamelCaseInEveryStyle) {
  for (const ConditionStyle style :
       {ConditionStyle::Meta, ConditionStyle::Kubeflow, ConditionStyle::Batch}) {
    // A kebab-case id that reached WithCondition is written in its reason form, never as is.
    const auto list = WithCondition(
        Json::object(), {"NcclDiagnosis", "True", "container-oom-killed", "m", {}}, style, kT0);
    EXPECT_EQ((*list)[0]["reason"], "ContainerOOMKilled");
    const auto kept = WithCondition(
        Json::object(), {"NcclPreflight", "False", "InsufficientValidatedNodes", "m", {}}, style,
        kT0);
    EXPECT_EQ((*kept)[0]["reason"], "InsufficientValidatedNodes");
  }
  const auto meta = WithCondition(Json::object(), {"NcclDiagnosis", "True", "GPUOOM", "m", {}},
                                  ConditionStyle::Meta, kT0);
  EXPECT_FALSE((*meta)[0].contains("lastUpdateTime"));
}

TEST(Rendezvous, ServiceNamesAreDnsLabelsUniquePerJob) {
  Json job{{"apiVersion", "kubeflow.org/v1"},
           {"kind", "PyTorchJob"},
           {"metadata", {{"name", "llama"}, {"namespace", "ns"}}}};
  EXPECT_EQ(core::RendezvousServiceName(job), "llama");
  job["metadata"]["name"] = "7b.run";
  const std::string rewritten = core::RendezvousServiceName(job);
  EXPECT_TRUE(core::IsDns1035Label(rewritten)) << rewritten;
  EXPECT_EQ(rewritten.rfind("j-7b-run-", 0), 0u) << rewritten;
  job["metadata"]["name"] = std::string(70, 'a');
  const std::string long_a = core::RendezvousServiceName(job);
  job["metadata"]["name"] = std::string(69, 'a') + "b";
  const std::string long_b = core::RendezvousServiceName(job);
  EXPECT_EQ(long_a.size(), 63u);
  EXPECT_NE(long_a, long_b);
  EXPECT_TRUE(core::IsDns1035Label(long_b));
  EXPECT_EQ(core::RendezvousServiceName(Json::object()), "");
}

TEST(Rendezvous, MasterAddressPerKindMatchesTheMasterAddrRule) {
  const Json pytorch = P5PyTorchJob("team-a", "llama", 1);
  EXPECT_EQ(core::MasterAddress(pytorch, "cluster.local"),
            "llama-master-0.llama.team-a.svc.cluster.local");
  // What the controller exposes passes the master-addr-unqualified rule.
  Json pod = CompliantPod();
  pod["spec"]["containers"][0]["env"].push_back(
      {{"name", "MASTER_ADDR"}, {"value", *core::MasterAddress(pytorch, "cluster.local")}});
  EXPECT_TRUE(FindingsOf(Check(pod), "master-addr-unqualified").empty());

  Json jobset{{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
              {"kind", "JobSet"},
              {"metadata", {{"name", "js"}, {"namespace", "n"}}},
              {"spec",
               {{"network", {{"subdomain", "net"}}},
                {"replicatedJobs", {{{"name", "workers"}, {"replicas", 2}}}}}}};
  EXPECT_EQ(core::MasterAddress(jobset, "corp.local"), "js-workers-0-0.net.n.svc.corp.local");
  Json mpi{{"apiVersion", "kubeflow.org/v2beta1"},
           {"kind", "MPIJob"},
           {"metadata", {{"name", "m"}, {"namespace", "n"}}}};
  EXPECT_EQ(core::RankZeroHostname(mpi), "m-worker-0");
  EXPECT_FALSE(core::MasterAddress(Json{{"apiVersion", "v1"}, {"kind", "Pod"}}, "cluster.local"));
}

TEST(NodeDemands, PacksGpusOntoWholeNodesPerInstanceType) {
  const core::Policy policy = core::Policy::Defaults();
  EXPECT_EQ(NodeDemands(P5PyTorchJob("n", "j", 3), policy).at(0).nodes, 4);

  Json half = P5PyTorchJob("n", "j", 3);
  for (const char* role : {"Master", "Worker"}) {
    half["spec"]["pytorchReplicaSpecs"][role]["template"]["spec"]["containers"][0]["resources"]
        ["limits"]["nvidia.com/gpu"] = 4;
  }
  const auto demands = NodeDemands(half, policy);
  ASSERT_EQ(demands.size(), 1u);
  EXPECT_EQ(demands[0].instance_type, "p5.48xlarge");
  EXPECT_EQ(demands[0].nodes, 2);

  Json unknown_type = P5PyTorchJob("n", "j", 2);
  for (const char* role : {"Master", "Worker"}) {
    unknown_type["spec"]["pytorchReplicaSpecs"][role]["template"]["spec"]["nodeSelector"]
                ["node.kubernetes.io/instance-type"] = "g6.48xlarge";
  }
  EXPECT_EQ(NodeDemands(unknown_type, policy).at(0).nodes, 3);  // one node per pod

  Json no_gpu = P5PyTorchJob("n", "j", 1);
  for (const char* role : {"Master", "Worker"}) {
    no_gpu["spec"]["pytorchReplicaSpecs"][role]["template"]["spec"]["containers"][0].erase(
        "resources");
  }
  EXPECT_TRUE(NodeDemands(no_gpu, policy).empty());

  Json broken = P5PyTorchJob("n", "j", 1);
  broken["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"] = "x";
  EXPECT_THROW(NodeDemands(broken, policy), core::InputError);
}

TEST(Gate, NoDemandMeansNothingToWaitFor) {
  FakeCluster cluster;
  const auto verdict = EvaluateGate({}, cluster, cluster.Policy());
  EXPECT_TRUE(verdict.release);
  EXPECT_EQ(verdict.reason, "NoValidationNeeded");
}

TEST(Gate, FailedNodeWithoutChecksStillNamed) {
  FakeCluster cluster;
  cluster.AddNode("bad", "p5.48xlarge", "Fail");
  cluster.policy().guide_base_url = "https://wiki.example/nccl/";
  const auto verdict = EvaluateGate({{"p5.48xlarge", 1}}, cluster, cluster.Policy());
  EXPECT_FALSE(verdict.release);
  EXPECT_EQ(verdict.message,
            "0/1 p5.48xlarge nodes validated; node bad failed \u2014 see "
            "https://wiki.example/nccl#efa-config");
}

TEST(PolicyObject, ConvertsAnNcclPolicyAndNamesTheObjectInErrors) {
  const Json object{
      {"apiVersion", "ncclguard.io/v1alpha1"},
      {"kind", "NcclPolicy"},
      {"metadata", {{"name", "default"}, {"resourceVersion", "7"}, {"uid", "u"}}},
      {"spec", {{"rendezvousPort", 23456}, {"gate", {{"countUnvalidatedNodes", true}}}}},
      {"status", {{"observedGeneration", 1}}}};
  const core::Policy policy = PolicyFromObject(object);
  EXPECT_EQ(policy.rendezvous_port, 23456);
  EXPECT_TRUE(policy.gate.count_unvalidated_nodes);
  EXPECT_TRUE(policy.gate.enabled);

  Json bad = object;
  bad["spec"]["gate"]["enabled"] = "maybe";
  try {
    PolicyFromObject(bad);
    FAIL() << "expected PolicyError";
  } catch (const core::PolicyError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("NcclPolicy default: spec.gate.enabled", 0), 0u)
        << e.what();
  }
  EXPECT_THROW(PolicyFromObject(Json::array()), core::PolicyError);
}

TEST(PolicyObject, HolderKeepsTheLastGoodPolicy) {
  PolicyHolder holder;
  EXPECT_EQ(holder.Current().rendezvous_port, 29500);
  Json object{{"apiVersion", "ncclguard.io/v1alpha1"},
              {"kind", "NcclPolicy"},
              {"metadata", {{"name", "default"}}},
              {"spec", {{"rendezvousPort", 23456}}}};
  EXPECT_FALSE(holder.Update(object));
  EXPECT_EQ(holder.Current().rendezvous_port, 23456);

  object["spec"]["rendezvousPort"] = 70000;
  const auto error = holder.Update(object);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("spec.rendezvousPort"), std::string::npos) << *error;
  EXPECT_NE(error->find("keeping the previous policy"), std::string::npos);
  EXPECT_EQ(holder.Current().rendezvous_port, 23456);

  EXPECT_FALSE(holder.Update(std::nullopt));
  EXPECT_EQ(holder.Current().rendezvous_port, 29500);
}

TEST(PolicyObject, StatusSaysWhetherThePolicyIsUsed) {
  Json object{{"apiVersion", "ncclguard.io/v1alpha1"},
              {"kind", "NcclPolicy"},
              {"metadata", {{"name", "default"}, {"generation", 3}}},
              {"spec", Json::object()}};
  auto patch = PolicyStatusPatch(object, std::nullopt, kT0);
  ASSERT_TRUE(patch);
  EXPECT_EQ((*patch)["status"]["observedGeneration"], 3);
  EXPECT_EQ((*patch)["status"]["conditions"][0]["reason"], "Valid");
  object.merge_patch(*patch);
  EXPECT_FALSE(PolicyStatusPatch(object, std::nullopt, kT0 + std::chrono::hours(1)));

  patch = PolicyStatusPatch(object, "NcclPolicy default: spec.rules.x: no rule with this id", kT0);
  ASSERT_TRUE(patch);
  EXPECT_EQ((*patch)["status"]["conditions"][0]["status"], "False");
  EXPECT_EQ((*patch)["status"]["conditions"][0]["reason"], "Invalid");
  object.merge_patch(*patch);
  object["metadata"]["generation"] = 4;  // a new spec, still invalid: only the generation moves
  patch = PolicyStatusPatch(object, "NcclPolicy default: spec.rules.x: no rule with this id", kT0);
  ASSERT_TRUE(patch);
  EXPECT_EQ((*patch)["status"]["observedGeneration"], 4);
  EXPECT_EQ((*patch)["status"]["conditions"][0]["status"], "False");
}

}  // namespace
}  // namespace ncclguard::test
