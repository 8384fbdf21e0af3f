#include <gtest/gtest.h>

#include "core/image_pin.h"
#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kImagePinRule = "image-pin";
constexpr const char* kTrainTag = "registry.ncclguard.test:5000/ml/train:2.4";
const std::string kRecorded = "sha256:" + std::string(64, 'a');

core::JobImagePins RecordedPins(core::PinMode mode = core::PinMode::Pin) {
  return {mode, "PyTorchJob pin", {{"pytorch", kTrainTag, kRecorded, "pin-master-0"}}};
}

core::Json PodWithImage(const std::string& image) {
  core::Json pod = CompliantPod();
  ContainerOf(pod)["image"] = image;
  return pod;
}

core::Evaluation EvaluateWith(const core::Json& pod, const core::JobImagePins* pins,
                              const core::Policy& policy = core::Policy::Defaults()) {
  return core::Evaluate(pod, policy, {.image_pins = pins});
}

TEST(ImagePin, PinsALaterPodOfTheJobToTheRecordedDigestKeepingTheTag) {
  const core::JobImagePins pins = RecordedPins();
  const core::Evaluation result = EvaluateWith(PodWithImage(kTrainTag), &pins);

  const auto findings = FindingsOf(result, kImagePinRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  EXPECT_EQ(findings.front().level, core::Level::Fix);
  EXPECT_EQ(findings.front().path, "/spec/containers/0/image");
  EXPECT_TRUE(Mentions(findings.front().message,
                       "container \"pytorch\" pinned to " + kRecorded +
                           ", the build pod pin-master-0 of PyTorchJob pin runs (image \"" +
                           kTrainTag + "\")"));
  EXPECT_TRUE(LinksTo(findings.front(), "nccl-version"));
  EXPECT_EQ(result.patch, core::Json::parse(R"([{"op": "replace",
      "path": "/spec/containers/0/image",
      "value": "registry.ncclguard.test:5000/ml/train:2.4@)" +
                                            kRecorded + R"("}])"))
      << Dump(result);
  EXPECT_EQ(result.fixed["spec"]["containers"][0]["image"],
            std::string(kTrainTag) + "@" + kRecorded);
  // Pinned, the image is no longer unpinned either.
  EXPECT_TRUE(FindingsOf(result, "image-unpinned").empty());
}

TEST(ImagePin, IsIdempotent) {
  const core::JobImagePins pins = RecordedPins();
  const core::Evaluation first = EvaluateWith(PodWithImage(kTrainTag), &pins);
  const core::Evaluation second = EvaluateWith(first.fixed, &pins);
  EXPECT_TRUE(FindingsOf(second, kImagePinRule).empty()) << Dump(second);
  EXPECT_TRUE(second.patch.empty()) << Dump(second);
  EXPECT_EQ(second.fixed, first.fixed);
}

TEST(ImagePin, LeavesTheUsersOwnDigestAlone) {
  const core::JobImagePins pins = RecordedPins();
  const std::string own = std::string(kTrainTag) + "@sha256:" + std::string(64, 'f');
  const core::Evaluation result = EvaluateWith(PodWithImage(own), &pins);
  EXPECT_TRUE(FindingsOf(result, kImagePinRule).empty()) << Dump(result);
  EXPECT_EQ(result.fixed["spec"]["containers"][0]["image"], own);
}

TEST(ImagePin, OnlyTheRecordedContainerAndImage) {
  const core::JobImagePins pins = RecordedPins();
  // Another image in the container (the job's template changed): not this pin's.
  EXPECT_TRUE(
      FindingsOf(EvaluateWith(PodWithImage("registry.ncclguard.test:5000/ml/train:2.5"), &pins),
                 kImagePinRule)
          .empty());
  // The same image in a container of another name.
  core::Json pod = PodWithImage(kTrainTag);
  ContainerOf(pod)["name"] = "other";
  EXPECT_TRUE(FindingsOf(EvaluateWith(pod, &pins), kImagePinRule).empty());
}

TEST(ImagePin, KeepsEveryOtherFieldOfThePod) {
  const core::JobImagePins pins = RecordedPins();
  const core::Json pod = PodWithImage(kTrainTag);
  const core::Evaluation result = EvaluateWith(pod, &pins);
  core::Json unpinned = result.fixed;
  unpinned["spec"]["containers"][0]["image"] = kTrainTag;
  EXPECT_EQ(unpinned, pod);
}

TEST(ImagePin, WarnModeWarnsThroughImageUnpinnedAndChangesNothing) {
  const core::JobImagePins pins = RecordedPins(core::PinMode::Warn);
  const core::Evaluation result = EvaluateWith(PodWithImage(kTrainTag), &pins);
  EXPECT_TRUE(FindingsOf(result, kImagePinRule).empty()) << Dump(result);
  EXPECT_TRUE(result.patch.empty());
  const auto warnings = FindingsOf(result, "image-unpinned");
  ASSERT_EQ(warnings.size(), 1u) << Dump(result);
  EXPECT_EQ(warnings.front().level, core::Level::Warn);
  EXPECT_TRUE(Mentions(warnings.front().message,
                       "container \"pytorch\": the job's pods run " + kRecorded +
                           "; by tag this pod may pull another build (pod pin-master-0 of "
                           "PyTorchJob pin ran it"));
}

TEST(ImagePin, NothingWithoutAJobsRecordOrWhenOff) {
  EXPECT_TRUE(EvaluateWith(PodWithImage(kTrainTag), nullptr).patch.empty());
  const core::JobImagePins off = RecordedPins(core::PinMode::Off);
  EXPECT_TRUE(EvaluateWith(PodWithImage(kTrainTag), &off).patch.empty());
  // The policy's rule switch too.
  core::Policy policy = core::Policy::Defaults();
  policy.rules["image-pin"].enabled = false;
  const core::JobImagePins pins = RecordedPins();
  EXPECT_TRUE(EvaluateWith(PodWithImage(kTrainTag), &pins, policy).patch.empty());
}

TEST(ImagePin, AJobsTemplateIsNeverPinned) {
  // The pin is for pods: a job's template keeps its tag (its pods are pinned as they come).
  const core::JobImagePins pins = RecordedPins();
  const core::Json job = Yaml(std::string(R"(
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: pin, namespace: ml}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
            - name: pytorch
              image: )") + kTrainTag +
                              "\n");
  EXPECT_TRUE(FindingsOf(EvaluateWith(job, &pins), kImagePinRule).empty());
}

}  // namespace
}  // namespace ncclguard::test
