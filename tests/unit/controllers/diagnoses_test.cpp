// Each runtime diagnosis against the pod statuses that show it, and the registry against the
// docs/rules.md catalog.
#include <gtest/gtest.h>

#include <set>

#include "controllers/diagnosis.h"
#include "core/catalog.h"
#include "tests/unit/controllers/fake_cluster.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

using controllers::DiagnosisContext;
using controllers::DiagnosisRegistry;

std::vector<std::string> Find(const std::string& id, const std::vector<Json>& pods,
                              const std::vector<Json>& events = {},
                              const controllers::GateVerdict* held = nullptr) {
  const auto* diagnosis = DiagnosisRegistry::Find(id);
  EXPECT_NE(diagnosis, nullptr) << id;
  if (diagnosis == nullptr) return {};
  const Json job = P5PyTorchJob("n", "j", 1, false);
  const std::map<std::string, Json, std::less<>> validations;
  return diagnosis->Find(DiagnosisContext{job, pods, events, validations, held});
}

Json Pod(const std::string& name, Json status) {
  return KubeflowPod("n", "j", name, std::move(status));
}

TEST(DiagnosisRegistry, CoversExactlyTheCatalogInRankOrder) {
  std::set<std::string> registered;
  int last_rank = -1;
  for (const auto* d : DiagnosisRegistry::All()) {
    registered.insert(std::string(d->Info().id));
    EXPECT_GE(d->Info().rank, last_rank);
    last_rank = d->Info().rank;
    EXPECT_FALSE(d->Info().remedy.empty()) << d->Info().id;
  }
  std::set<std::string> catalog;
  for (const auto& entry : core::Catalog::Of(core::FindingKind::Diagnosis))
    catalog.insert(std::string(entry.id));
  EXPECT_EQ(registered, catalog);
}

TEST(DiagnosisRegistry, DocsListEveryDiagnosisWithItsGuideSection) {
  const std::string docs = ReadFile(SourcePath("docs/rules.md"));
  for (const auto* d : DiagnosisRegistry::All()) {
    const std::string row = "| `" + std::string(d->Info().id) + "` |";
    const auto at = docs.find(row);
    ASSERT_NE(at, std::string::npos) << d->Info().id << " missing from docs/rules.md";
    const std::string line = docs.substr(at, docs.find('\n', at) - at);
    EXPECT_NE(line.find("(guide.md#" + std::string(d->Info().slug) + ")"), std::string::npos)
        << line;
  }
}

TEST(Diagnoses, ContainerOomKilledFromReasonOrExitCode) {
  EXPECT_EQ(Find("container-oom-killed", {Pod("p", Terminated("c", 137, "OOMKilled"))}),
            std::vector<std::string>{"pod p container c was OOMKilled (exit code 137)"});
  EXPECT_EQ(Find("container-oom-killed", {Pod("p", Terminated("c", 137, "Error"))}).size(), 1u);
  EXPECT_TRUE(Find("container-oom-killed", {Pod("p", Terminated("c", 1, "Error"))}).empty());
  // A restarted container keeps the kill in lastState.
  Json restarted{
      {"containerStatuses",
       {{{"name", "c"},
         {"state", {{"running", Json::object()}}},
         {"lastState", {{"terminated", {{"exitCode", 137}, {"reason", "OOMKilled"}}}}}}}}};
  EXPECT_EQ(Find("container-oom-killed", {Pod("p", restarted)}).size(), 1u);
}

TEST(Diagnoses, GpuOomFromTheTerminationMessage) {
  EXPECT_EQ(Find("gpu-oom", {Pod("p", Terminated("c", 1, "Error",
                                                 "RuntimeError: CUDA out of memory. Tried to "
                                                 "allocate 20.00 MiB"))})
                .size(),
            1u);
  EXPECT_TRUE(Find("gpu-oom", {Pod("p", Terminated("c", 1, "Error", "KeyError: 'x'"))}).empty());
}

TEST(Diagnoses, SegfaultFromExitCode139) {
  EXPECT_EQ(
      Find("segfault", {Pod("p", Terminated("c", 139, "Error"))}),
      std::vector<std::string>{"pod p container c exited with code 139 (segmentation fault)"});
}

TEST(Diagnoses, NcclWatchdogTimeout) {
  const std::string message =
      "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, "
      "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.";
  EXPECT_EQ(
      Find("nccl-watchdog-timeout", {Pod("p", Terminated("c", 134, "Error", message))}).size(), 1u);
  EXPECT_TRUE(
      Find("nccl-watchdog-timeout", {Pod("p", Terminated("c", 1, "Error", "timeout"))}).empty());
}

TEST(Diagnoses, ImagePullFailuresOnceAcrossRetries) {
  auto waiting = [](const std::string& reason, const std::string& message) {
    return Json{{"containerStatuses",
                 {{{"name", "c"},
                   {"image", "nvcr.io/nvidia/pytorch:24.13"},
                   {"state", {{"waiting", {{"reason", reason}, {"message", message}}}}}}}}};
  };
  const auto first = Find("image-pull-failed", {Pod("p", waiting("ErrImagePull", "not found"))});
  const auto later =
      Find("image-pull-failed", {Pod("p", waiting("ImagePullBackOff", "Back-off pulling"))});
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first, later);  // one Event, not one per retry
  EXPECT_TRUE(Find("image-pull-failed", {Pod("p", waiting("ContainerCreating", ""))}).empty());
}

// The messages are the real kube-scheduler's (v1.34 and v1.35, tests/node/training_test.sh): a node
// full of GPU pods is short of both resources, and that is no EFA problem.
TEST(Diagnoses, EfaUnschedulableOnlyWhereTheGpusAreThere) {
  auto unschedulable = [](const std::string& message) {
    return Pod("p", Json{{"conditions",
                          {{{"type", "PodScheduled"},
                            {"status", "False"},
                            {"reason", "Unschedulable"},
                            {"message", message}}}}});
  };
  const std::string no_efa =
      "0/1 nodes are available: 1 Insufficient vpc.amazonaws.com/efa. no new claims to "
      "deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for "
      "scheduling.";
  const auto found = Find("efa-unschedulable", {unschedulable(no_efa)});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0], "pod p: " + no_efa);
  const std::string full =
      "0/1 nodes are available: 1 Insufficient nvidia.com/gpu, 1 Insufficient "
      "vpc.amazonaws.com/efa. no new claims to deallocate, preemption: 0/1 nodes are available: "
      "1 No preemption victims found for incoming pod.";
  EXPECT_TRUE(Find("efa-unschedulable", {unschedulable(full)}).empty());
  // Of 12 nodes, 2 are full and 10 have the GPUs but not the EFA devices.
  EXPECT_EQ(Find("efa-unschedulable",
                 {unschedulable("0/12 nodes are available: 2 Insufficient nvidia.com/gpu, 12 "
                                "Insufficient vpc.amazonaws.com/efa.")})
                .size(),
            1u);
  Json event{{"reason", "FailedScheduling"},
             {"regarding", {{"kind", "Pod"}, {"name", "p"}}},
             {"note", full}};
  EXPECT_TRUE(Find("efa-unschedulable", {}, {event}).empty());
  event["note"] = no_efa;
  EXPECT_EQ(Find("efa-unschedulable", {}, {event}).size(), 1u);
}

TEST(Diagnoses, ManyPodsAreSummarised) {
  std::vector<Json> pods;
  for (int i = 0; i < 10; ++i)
    pods.push_back(Pod("p" + std::to_string(i), Terminated("c", 139, "")));
  const auto lines = Find("segfault", pods);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines.back(), "and 7 more");
}

TEST(Diagnoses, InsufficientValidatedNodesOnlyWhileHeld) {
  EXPECT_TRUE(Find("insufficient-validated-nodes", {}).empty());
  const controllers::GateVerdict held{false, "InsufficientValidatedNodes",
                                      "1/2 p5.48xlarge nodes validated \u2014 see x#efa-config",
                                      "efa-config", "1/2 p5.48xlarge nodes validated"};
  EXPECT_EQ(
      Find("insufficient-validated-nodes", {}, {}, &held),
      std::vector<std::string>{"held by the ncclguard gate: 1/2 p5.48xlarge nodes validated"});
}

}  // namespace
}  // namespace ncclguard::test
