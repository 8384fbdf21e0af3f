// Time and memory bounds of the parsers and the review path (issue 23, docs/limits.md): objects
// with many keys and pods with many containers cost linear time, YAML aliases cannot expand a
// document without bound, and a review's memory is budgeted: past the budget, or when the system
// refuses memory, the review fails alone. Bounds are checked with resource limits on a child
// process (resource_bound.h), not with clocks.
#include <gtest/gtest.h>

#include <string>

#include "core/documents.h"
#include "core/errors.h"
#include "core/json_reader.h"
#include "core/patch.h"
#include "core/policy.h"
#include "core/trainjob.h"
#include "memory/allocation_budget.h"
#include "tests/unit/resource_bound.h"
#include "webhook/review_answer.h"

namespace ncclguard::test {
namespace {

using core::Json;

constexpr int kCpuSeconds = 20;  // the work below takes well under a second at linear cost
constexpr std::size_t kMiB = std::size_t{1} << 20;

Json GpuContainer(const std::string& name) {
  return Json{{"name", name},
              {"image", "registry.example/train@sha256:" + std::string(64, 'a')},
              {"resources", {{"limits", {{"nvidia.com/gpu", 8}}}}}};
}

Json PodWith(Json metadata, Json containers) {
  return Json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", std::move(metadata)},
              {"spec", {{"containers", std::move(containers)}}}};
}

Json ManyKeys(std::size_t count) {
  Json keys = Json::object();
  auto& members = static_cast<Json::object_t::Container&>(keys.get_ref<Json::object_t&>());
  for (std::size_t i = 0; i < count; ++i) members.emplace_back("key-" + std::to_string(i), "v");
  return keys;
}

std::string Review(Json object) {
  return Json{{"apiVersion", "admission.k8s.io/v1"},
              {"kind", "AdmissionReview"},
              {"request",
               {{"uid", "b0d1e5a4-0000-4000-8000-000000000001"},
                {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                {"namespace", "ml"},
                {"name", "p"},
                {"operation", "CREATE"},
                {"object", std::move(object)}}}}
      .dump();
}

std::string Admit(webhook::Endpoint endpoint, const std::string& body) {
  const webhook::ReviewAnswer answer =
      webhook::AnswerReview(endpoint, body, core::Policy::Defaults(), {});
  if (!answer.decoded) return "not decoded: " + answer.error;
  return std::string(webhook::AdmitResultName(answer.outcome.result)) + " " +
         std::to_string(answer.outcome.response.patch.size());
}

TEST(ParserBounds, TwoHundredThousandKeysAreReadInLinearTime) {
  // Was: 53 s of CPU for 100k keys as JSON, 108 s as YAML (ordered_json's key lookup scans).
  const Json pod =
      PodWith({{"name", "p"}, {"labels", ManyKeys(200000)}}, Json::array({GpuContainer("c")}));
  const std::string json = pod.dump();
  const std::string yaml = core::ToYaml(pod);
  const BoundedRun run = RunBounded(kCpuSeconds, 2048 * kMiB, [&] {
    const core::DocumentSet from_json = core::ParseDocuments(json);
    const core::DocumentSet from_yaml = core::ParseDocuments(yaml);
    const Json& labels = from_json.documents.at(0).at("metadata").at("labels");
    return std::to_string(labels.size()) + " " + labels.at("key-199999").get<std::string>() + " " +
           (from_yaml.documents.at(0) == from_json.documents.at(0) ? "same" : "different");
  });
  EXPECT_TRUE(run.finished) << "signal " << run.signal << " after " << run.cpu_seconds
                            << " s of CPU";
  EXPECT_EQ(run.result, "200000 v same");
}

TEST(ParserBounds, ARepeatedJsonKeyKeepsItsFirstPlaceAndItsLastValue) {
  // As kube-apiserver reads it; in small objects (scanned) and large ones (indexed) alike.
  for (const std::size_t others : {std::size_t{2}, std::size_t{40}}) {
    std::string text = R"({"a": 1)";
    for (std::size_t i = 0; i < others; ++i) text += ",\"k" + std::to_string(i) + "\": 0";
    text += R"(, "a": {"b": [1]}})";
    const Json read = core::ReadJson(text);
    EXPECT_EQ(read.size(), others + 1);
    EXPECT_EQ(read.begin().key(), "a");
    EXPECT_EQ(read.at("a"), Json::parse(R"({"b": [1]})"));
  }
}

TEST(ParserBounds, ObjectsOfEverySizeReadAsNlohmannReadsThem) {
  // Members are moved, not copied, as an object grows (core::ReserveMember): every growth step,
  // with nested values and keys past the short-string size, keeps order and values.
  for (const std::size_t members :
       {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{5}, std::size_t{9},
        std::size_t{16}, std::size_t{17}, std::size_t{70}}) {
    Json object = Json::object();
    for (std::size_t i = 0; i < members; ++i) {
      const std::string key =
          (i % 2 == 0 ? "k" : "a-key-longer-than-a-short-string-") + std::to_string(members - i);
      object[key] = Json{{"list", Json::array({i, "x", Json{{"n", i}}})}, {"s", key}};
    }
    const std::string text = object.dump();
    const Json read = core::ReadJson(text);
    EXPECT_EQ(read, Json::parse(text)) << members;
    EXPECT_EQ(read.dump(), text) << members;
  }
}

TEST(ParserBounds, AYamlAliasBombIsAnInputErrorNamingItsDocument) {
  // 9 levels of 9 aliases: 10^9 values from a few hundred bytes. Was: 4 GB, then an abort.
  std::string bomb = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n";
  bomb += "data:\n  a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (char level = 'b'; level <= 'j'; ++level) {
    const char below = static_cast<char>(level - 1);
    bomb += std::string("  ") + level + ": &" + level + " [";
    for (int i = 0; i < 9; ++i) bomb += std::string(i ? ", *" : "*") + below;
    bomb += "]\n";
  }
  const std::string text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\n" + bomb;
  const BoundedRun run = RunBounded(kCpuSeconds, 512 * kMiB, [&]() -> std::string {
    try {
      core::ParseDocuments(text);
    } catch (const core::InputError& e) {
      return e.what();
    }
    return "parsed";
  });
  EXPECT_TRUE(run.finished) << "signal " << run.signal << " after " << run.cpu_seconds
                            << " s of CPU";
  EXPECT_EQ(run.result,
            "document 2: larger than 1048576 values or 32 MiB of text once its aliases are "
            "expanded (YAML anchors repeated by aliases)");
}

TEST(ParserBounds, AliasesWithinTheLimitAreExpanded) {
  const core::DocumentSet set = core::ParseDocuments(
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, labels: &l {app: x}}\n"
      "data: {a: &s text}\nextra: {labels: *l, copy: *s}\n");
  EXPECT_EQ(set.documents.at(0).at("extra"),
            Json::parse(R"({"labels":{"app":"x"},"copy":"text"})"));
}

TEST(ParserBounds, AReviewWithTwoHundredThousandKeysIsAnsweredInLinearTime) {
  // Was: 60 s per request in the webhook for 100k keys.
  const std::string body =
      Review(PodWith({{"name", "p"}, {"namespace", "ml"}}, Json::array({GpuContainer("c")})));
  Json object = Json::parse(body).at("request").at("object");
  object["spec"]["nodeSelector"] = ManyKeys(200000);
  const std::string big = Review(object);
  const BoundedRun run = RunBounded(kCpuSeconds, 2048 * kMiB, [&] {
    return Admit(webhook::Endpoint::Validate, big) + ", " +
           Admit(webhook::Endpoint::Mutate, big).substr(0, 7);
  });
  EXPECT_TRUE(run.finished) << "signal " << run.signal << " after " << run.cpu_seconds
                            << " s of CPU";
  EXPECT_EQ(run.result, "warned 0, patched");
}

TEST(ParserBounds, APlanOverFortyThousandContainersIsBuiltInLinearTime) {
  // Was: 15 s on /validate for 10,000 containers: PatchPlan scanned everything it had created
  // for every operation that reads below it (each container's env, appended to).
  constexpr int kContainers = 40000;
  Json pod = Json::object();
  pod["spec"]["containers"] = Json::array();
  for (int i = 0; i < kContainers; ++i) pod["spec"]["containers"].push_back(Json::object());
  const BoundedRun run = RunBounded(kCpuSeconds, 2048 * kMiB, [&] {
    core::PatchPlan plan(pod);
    for (int i = 0; i < kContainers; ++i) {
      const core::JsonPointer env("/spec/containers/" + std::to_string(i) + "/env");
      plan.Append(env, Json{{"name", "FI_PROVIDER"}, {"value", "efa"}});
      plan.Append(env, Json{{"name", "FI_EFA_USE_DEVICE_RDMA"}, {"value", "1"}});
      plan.Append(env, Json{{"name", "NCCL_DEBUG"}, {"value", "INFO"}});
    }
    const bool last_has_three = plan.Exists(
        core::JsonPointer("/spec/containers/" + std::to_string(kContainers - 1) + "/env/2/name"));
    return std::to_string(plan.ops().size()) + (last_has_three ? " three each" : " missing");
  });
  EXPECT_TRUE(run.finished) << "signal " << run.signal << " after " << run.cpu_seconds
                            << " s of CPU";
  EXPECT_EQ(run.result, "120000 three each");
}

// A review of ~7 MB whose object holds millions of empty lists: ~200 MB once parsed.
std::string NestedListsReview() {
  std::string lists;
  lists.reserve(7'000'000);
  lists += '[';
  for (int i = 0; i < 2'300'000; ++i) lists += i ? ",[]" : "[]";
  lists += ']';
  const std::string body =
      Review(PodWith({{"name", "p"}, {"namespace", "ml"}}, Json::array({GpuContainer("c")})));
  const std::string marker = R"("spec":{)";
  std::string hostile = body;
  hostile.insert(hostile.find(marker) + marker.size(), "\"lists\":" + lists + ",");
  return hostile;
}

TEST(ParserBounds, AReviewPastItsMemoryBudgetFailsAloneAndGivesItBack) {
  const std::string hostile = NestedListsReview();
  memory::BudgetPool pool(160 * kMiB);
  bool refused = false;
  std::size_t peak = 0;
  {
    memory::BudgetScope budget(64 * kMiB, &pool);
    try {
      Admit(webhook::Endpoint::Validate, hostile);
    } catch (const memory::BudgetExceeded& e) {
      refused = !e.Pool();
    }
    peak = budget.Peak();
  }
  EXPECT_TRUE(refused);
  // The refused allocation crossed 64 MiB; freeing the tree afterwards may allocate up to as much
  // again (nlohmann's destructor moves a list's items onto a stack).
  EXPECT_LE(peak, 2 * 64 * kMiB);
  EXPECT_EQ(pool.InUse(), 0u);
  memory::BudgetScope next(64 * kMiB, &pool);
  EXPECT_EQ(Admit(webhook::Endpoint::Validate,
                  Review(PodWith({{"name", "p"}}, Json::array({GpuContainer("c")})))),
            "warned 0");
}

TEST(AllocationBudget, CountsThisThreadsAllocationsAndRefusesPastTheLimit) {
  memory::BudgetPool pool(8 * kMiB);
  memory::BudgetScope scope(2 * kMiB, &pool);
  std::string kept(kMiB, 'x');
  EXPECT_GE(scope.Allocated(), static_cast<std::ptrdiff_t>(kMiB));
  EXPECT_THROW(std::string(2 * kMiB, 'y'), memory::BudgetExceeded);
  EXPECT_TRUE(scope.Exceeded());
  // Once refused, it lets the unwinding (and the error answer) allocate.
  EXPECT_NO_THROW(std::string(3 * kMiB, 'z'));
}

TEST(AllocationBudget, ThePoolIsSharedAndGivenBackWhenAScopeEnds) {
  memory::BudgetPool pool(4 * kMiB);
  ASSERT_TRUE(pool.TryTake(3 * kMiB));  // another review's body
  {
    memory::BudgetScope scope(64 * kMiB, &pool);
    try {
      std::string big(2 * kMiB, 'x');
      ADD_FAILURE() << "the pool had room for only 1 MiB";
    } catch (const memory::BudgetExceeded& e) {
      EXPECT_TRUE(e.Pool());
    }
  }
  pool.Give(3 * kMiB);
  EXPECT_EQ(pool.InUse(), 0u);
  {
    memory::BudgetScope scope(64 * kMiB, &pool);
    std::string fits(2 * kMiB, 'x');
    EXPECT_GE(pool.InUse(), 2 * kMiB);
  }
  EXPECT_EQ(pool.InUse(), 0u);
}

}  // namespace
}  // namespace ncclguard::test

namespace ncclguard::test {
namespace {

// A TrainJob is rendered into the JobSet Trainer makes of it (core/trainjob.h): env entries,
// volumes, mounts and patches are merged by name through indexes. Was quadratic before it was
// measured: each entry searched the list it was merged into.
TEST(ParserBounds, ATrainJobWithEightyThousandEnvEntriesAndPatchesIsRenderedInLinearTime) {
  constexpr int kEntries = 80000;
  Json trainjob{{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
                {"kind", "TrainJob"},
                {"metadata", {{"name", "t"}, {"namespace", "ml"}}},
                {"spec",
                 {{"runtimeRef", {{"name", "torch"}}},
                  {"trainer", {{"numNodes", 2}, {"env", Json::array()}}}}}};
  Json patch_spec = {{"volumes", Json::array()}, {"containers", Json::array()}};
  Json mounts = Json::array();
  for (int i = 0; i < kEntries; ++i) {
    const std::string n = std::to_string(i);
    trainjob["spec"]["trainer"]["env"].push_back(Json{{"name", "V" + n}, {"value", n}});
    patch_spec["volumes"].push_back(Json{{"name", "v" + n}, {"emptyDir", Json::object()}});
    mounts.push_back(Json{{"name", "v" + n}, {"mountPath", "/m/" + n}});
  }
  patch_spec["containers"].push_back(Json{{"name", "node"}, {"volumeMounts", mounts}});
  Json jobs = Json::array();
  for (int i = 0; i < kEntries; ++i) {
    jobs.push_back(Json{{"name", i == 0 ? std::string("node") : "j" + std::to_string(i)},
                        {"template", {{"spec", {{"template", {{"spec", patch_spec}}}}}}}});
    if (i == 0) patch_spec = Json::object();  // one full entry, the others small
  }
  trainjob["spec"]["runtimePatches"] = Json::array(
      {Json{{"manager", "m"},
            {"trainingRuntimeSpec", {{"template", {{"spec", {{"replicatedJobs", jobs}}}}}}}}});
  const BoundedRun run = RunBounded(kCpuSeconds, 2048 * kMiB, [&] {
    const Json rendered = core::RenderTrainJob(trainjob, nullptr);
    const Json& node = rendered.at(
        core::JsonPointer("/spec/replicatedJobs/0/template/spec/template/spec/containers/0"));
    return std::to_string(node.at("env").size()) + " env, " +
           std::to_string(node.at("volumeMounts").size()) + " mounts";
  });
  EXPECT_TRUE(run.finished) << "signal " << run.signal << " after " << run.cpu_seconds
                            << " s of CPU";
  EXPECT_EQ(run.result, "80000 env, 80000 mounts");
}

}  // namespace
}  // namespace ncclguard::test
