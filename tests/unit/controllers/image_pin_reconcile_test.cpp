// The controller's half of the image pin (core/image_pin.h): the digest a managed job's first pods
// run is recorded on the job once, with the version it was read at; pods of one job that run
// different digests get diagnosis image-drift (condition and Event, guide section 10).
#include <gtest/gtest.h>

#include <variant>

#include "controllers/training_job_reconciler.h"
#include "core/contract.h"
#include "core/image_pin.h"
#include "tests/unit/controllers/fake_cluster.h"

namespace ncclguard::test {
namespace {

using controllers::MergePatch;
using controllers::ReconcileTrainingJob;
using controllers::RecordEvent;
using core::WorkloadKind;

const controllers::Timestamp kPinNow =
    std::chrono::sys_days(std::chrono::year(2026) / 12 / 7) + std::chrono::hours(10);
constexpr const char* kTag = "registry.ncclguard.test:5000/ml/train:2.4";
constexpr const char* kRepository = "registry.ncclguard.test:5000/ml/train";
const std::string kFirst = "sha256:" + std::string(64, '1');
const std::string kSecond = "sha256:" + std::string(64, '2');

Json PinnedJobPod(const std::string& name, const std::string& created, const std::string& image,
                  const std::string& digest) {
  Json pod = KubeflowPod(
      "team-a", "pin", name,
      Json{{"phase", "Running"},
           {"containerStatuses",
            Json::array({Json{{"name", "pytorch"},
                              {"image", kTag},
                              {"imageID", std::string(kRepository) + "@" + digest}}})}});
  pod["metadata"]["creationTimestamp"] = created;
  pod["spec"]["containers"] = Json::array({Json{{"name", "pytorch"}, {"image", image}}});
  return pod;
}

Json DiagnosisOf(const Json& job) {
  for (const Json& c : job["status"]["conditions"]) {
    if (c["type"] == core::kDiagnosisCondition) return c;
  }
  return nullptr;
}

class ImagePinReconcile : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_.AddNamespace("team-a", true);
    cluster_.AddJob(P5PyTorchJob("team-a", "pin", 1, false));
  }
  std::vector<MergePatch> AnnotationPatches(const controllers::ReconcileResult& result) {
    std::vector<MergePatch> out;
    for (const auto& action : result.actions) {
      const auto* patch = std::get_if<MergePatch>(&action);
      if (patch != nullptr && !patch->status_subresource && patch->patch.contains("metadata") &&
          patch->patch["metadata"].contains("annotations")) {
        out.push_back(*patch);
      }
    }
    return out;
  }
  std::string Recorded() {
    const Json& job = cluster_.JobObject(key_);
    return job["metadata"]["annotations"].value(std::string(core::kImageDigestsAnnotation), "");
  }
  FakeCluster cluster_;
  const controllers::JobKey key_{WorkloadKind::PyTorchJob, "team-a", "pin"};
};

TEST_F(ImagePinReconcile, RecordsTheFirstPodsDigestOnTheJobOnce) {
  cluster_.AddPod(PinnedJobPod("pin-master-0", "2026-12-07T09:00:00Z", kTag, kFirst));
  const auto first = ReconcileTrainingJob(key_, cluster_, kPinNow);
  const auto patches = AnnotationPatches(first);
  ASSERT_EQ(patches.size(), 1u);
  // Written from the version it read: a stale cache gets a Conflict, never a second record.
  EXPECT_EQ(patches.front().patch["metadata"]["resourceVersion"],
            cluster_.JobObject(key_)["metadata"]["resourceVersion"]);
  EXPECT_EQ(cluster_.Apply(first.actions), 0);
  const auto pins = core::ReadImagePins(Recorded());
  ASSERT_EQ(pins.size(), 1u);
  EXPECT_EQ(pins.front(), (core::ImagePin{"pytorch", kTag, kFirst, "pin-master-0"}));

  // The Worker, replaced after the tag was pushed again, pinned by the webhook: the record stays.
  cluster_.AddPod(PinnedJobPod("pin-worker-0", "2026-12-07T09:30:00Z",
                               std::string(kTag) + "@" + kFirst, kFirst));
  EXPECT_TRUE(AnnotationPatches(ReconcileTrainingJob(key_, cluster_, kPinNow)).empty());
}

TEST_F(ImagePinReconcile, AStaleReadOfTheJobConflictsInsteadOfRecordingAgain) {
  cluster_.AddPod(PinnedJobPod("pin-master-0", "2026-12-07T09:00:00Z", kTag, kFirst));
  const auto stale = ReconcileTrainingJob(key_, cluster_, kPinNow);
  // Another replica recorded meanwhile (the job's version moved on).
  ASSERT_EQ(cluster_.Apply(ReconcileTrainingJob(key_, cluster_, kPinNow).actions), 0);
  EXPECT_GT(cluster_.Apply(stale.actions), 0);
}

TEST_F(ImagePinReconcile, DriftIsTheDiagnosisNamingEachPodAndDigest) {
  cluster_.AddPod(PinnedJobPod("pin-master-0", "2026-12-07T09:00:00Z", kTag, kFirst));
  cluster_.AddPod(PinnedJobPod("pin-worker-0", "2026-12-07T09:30:00Z", kTag, kSecond));
  for (int round = 0; round < 3; ++round) {
    cluster_.Apply(ReconcileTrainingJob(key_, cluster_, kPinNow).actions);
  }
  const Json condition = DiagnosisOf(cluster_.JobObject(key_));
  ASSERT_FALSE(condition.is_null());
  EXPECT_EQ(condition["status"], "True");
  EXPECT_EQ(condition["reason"], "ImageDrift");
  const std::string message = condition["message"];
  for (const std::string& part : {std::string("pin-master-0"), std::string("pin-worker-0"), kFirst,
                                  kSecond, std::string("guide.md#nccl-version")}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
  }
  bool event = false;
  for (const Json& e : cluster_.events()) {
    event = event || (e.value("reason", "") == "ImageDrift" && e.value("type", "") == "Warning");
  }
  EXPECT_TRUE(event);
  // The record is still the first pod's digest: the drift does not move the pin.
  EXPECT_EQ(core::ReadImagePins(Recorded()).front().digest, kFirst);
}

TEST_F(ImagePinReconcile, AnUnreadableRecordIsSaidAndWrittenAnew) {
  cluster_.JobObject(key_)["metadata"]["annotations"][std::string(core::kImageDigestsAnnotation)] =
      "{not json";
  cluster_.AddPod(PinnedJobPod("pin-master-0", "2026-12-07T09:00:00Z", kTag, kFirst));
  const auto result = ReconcileTrainingJob(key_, cluster_, kPinNow);
  bool said = false;
  for (const auto& action : result.actions) {
    if (const auto* e = std::get_if<RecordEvent>(&action)) {
      said = said || e->reason == "ImageDigestsUnreadable";
    }
  }
  EXPECT_TRUE(said);
  EXPECT_EQ(cluster_.Apply(result.actions), 0);
  EXPECT_EQ(core::ReadImagePins(Recorded()).front().digest, kFirst);
}

}  // namespace
}  // namespace ncclguard::test
