// Seeded type mutations of the shipped example jobs, their pods and their nodes' NodeValidations:
// whatever the caches hold, a reconcile returns (a spec the rules cannot read is reported on the
// job); it never throws.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "controllers/job_kind.h"
#include "controllers/training_job_reconciler.h"
#include "core/documents.h"
#include "tests/unit/controllers/fake_cluster.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

std::vector<Json> ExampleJobs() {
  std::vector<Json> jobs;
  for (const auto& entry : std::filesystem::directory_iterator(SourcePath("examples"))) {
    if (entry.path().extension() != ".yaml") continue;
    for (Json& doc : core::ParseDocuments(ReadFile(entry.path().string())).documents) {
      if (core::ManagedKindOf(doc)) jobs.push_back(std::move(doc));
    }
  }
  return jobs;
}

void Pointers(const Json& node, const core::JsonPointer& at, std::vector<core::JsonPointer>& out) {
  out.push_back(at);
  if (node.is_object()) {
    for (const auto& [key, value] : node.items()) Pointers(value, at / key, out);
  } else if (node.is_array()) {
    for (std::size_t i = 0; i < node.size(); ++i) Pointers(node[i], at / i, out);
  }
}

Json RandomValue(std::mt19937& rng) {
  switch (rng() % 7) {
    case 0:
      return nullptr;
    case 1:
      return -1;
    case 2:
      return "x";
    case 3:
      return Json::array({1, "y"});
    case 4:
      return Json::object({{"z", 0}});
    case 5:
      return true;
    default:
      return 1e300;
  }
}

void Mutate(Json& object, std::mt19937& rng, int edits) {
  for (int e = 0; e < edits; ++e) {
    std::vector<core::JsonPointer> pointers;
    Pointers(object, core::JsonPointer(), pointers);
    const auto& at = pointers[rng() % pointers.size()];
    if (at.empty()) continue;
    object[at] = RandomValue(rng);
  }
}

TEST(OperatorRobustness, MutatedJobsPodsAndValidationsNeverThrow) {
  std::mt19937 rng(11);
  const auto jobs = ExampleJobs();
  ASSERT_GE(jobs.size(), 4u);
  for (int round = 0; round < 600; ++round) {
    Json job = jobs[static_cast<std::size_t>(round) % jobs.size()];
    job["metadata"]["namespace"] = "team-a";
    if (round % 2 == 0) job["metadata"]["annotations"]["ncclguard.io/gate"] = "pending";
    job["metadata"]["labels"]["ncclguard.io/managed"] = "true";
    const auto kind = core::ManagedKindOf(job);
    const std::string name = job["metadata"]["name"].get<std::string>();
    const std::string pod_label(core::KindInfoOf(*kind).pod_job_label);

    Json pod{{"apiVersion", "v1"},
             {"kind", "Pod"},
             {"metadata",
              {{"name", name + "-0"}, {"namespace", "team-a"}, {"labels", {{pod_label, name}}}}},
             {"spec", {{"nodeName", "n1"}}},
             {"status", Terminated("c", 137, "OOMKilled", "CUDA out of memory")}};
    Json checks = Json::array({{{"id", "nccl-version"}, {"status", "Fail"}, {"observed", "2.1"}}});
    Mutate(job, rng, 1 + static_cast<int>(rng() % 3));
    Mutate(pod, rng, static_cast<int>(rng() % 3));
    Mutate(checks, rng, static_cast<int>(rng() % 2));

    FakeCluster cluster;
    cluster.AddNamespace("team-a", true);
    if (!job.is_object() || !job.contains("metadata") || !job["metadata"].is_object() ||
        !core::ManagedKindOf(job)) {
      continue;  // not a job any more: no key would reach the reconciler
    }
    job["metadata"]["name"] = name;
    job["metadata"]["namespace"] = "team-a";
    cluster.AddJob(job);
    cluster.AddPod(pod);
    cluster.AddNode("n1", "p5.48xlarge", "Fail", checks);
    const controllers::JobKey key{*kind, "team-a", name};
    EXPECT_NO_THROW({
      const auto result = controllers::ReconcileTrainingJob(key, cluster, {});
      cluster.Apply(result.actions);
      (void)controllers::ReconcileTrainingJob(key, cluster, {});
    }) << "round "
       << round << ": " << job.dump();
  }
}

}  // namespace
}  // namespace ncclguard::test
