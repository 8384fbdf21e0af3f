// The image pin's pure parts (core/image_ref.h, core/image_pin.h): reading image references and
// what the kubelet says a container runs, the job's record (its annotation), which digest a job
// records and keeps, and which pods of a job drift apart.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/contract.h"
#include "core/errors.h"
#include "core/image_pin.h"
#include "core/image_ref.h"
#include "core/json.h"

namespace ncclguard::core {
namespace {

const std::string kDigestA = "sha256:" + std::string(64, 'a');
const std::string kDigestB = "sha256:" + std::string(64, 'b');
const std::string kDigestC = "sha256:" + std::string(64, 'c');
constexpr const char* kTrain = "registry.ncclguard.test:5000/ml/train:2.4";
constexpr const char* kTrainRepository = "registry.ncclguard.test:5000/ml/train";

TEST(ImageReference, ReadsARegistryWithAPortANestedPathATagAndADigest) {
  const ImageReference ref =
      ParseImageReference("Registry.Example:5000/team/ml/train:2.4-cu12@" + kDigestA);
  EXPECT_EQ(ref.domain, "Registry.Example:5000");
  EXPECT_EQ(ref.path, "team/ml/train");
  EXPECT_EQ(ref.tag, "2.4-cu12");
  EXPECT_EQ(ref.digest, kDigestA);
  EXPECT_EQ(ref.Name(), "Registry.Example:5000/team/ml/train");
  EXPECT_EQ(ref.Repository(), "registry.example:5000/team/ml/train");
  EXPECT_EQ(ref.Registry(), "registry.example:5000");
  EXPECT_EQ(ref.WithoutDigest(), "Registry.Example:5000/team/ml/train:2.4-cu12");
}

TEST(ImageReference, NamesDockerHubsShortNamesInFull) {
  EXPECT_EQ(ParseImageReference("busybox").Repository(), "docker.io/library/busybox");
  EXPECT_EQ(ParseImageReference("pytorch/pytorch:2.4").Repository(), "docker.io/pytorch/pytorch");
  EXPECT_EQ(ParseImageReference("docker.io/busybox:1").Repository(), "docker.io/library/busybox");
  EXPECT_EQ(ParseImageReference("localhost/x/y:1").Repository(), "localhost/x/y");
  EXPECT_EQ(ParseImageReference("localhost:5000/y").domain, "localhost:5000");
  // A first component without '.', ':' or "localhost" is a path, not a registry.
  EXPECT_EQ(ParseImageReference("team/train:1").domain, "");
  EXPECT_EQ(ParseImageReference("[::1]:5000/train:1").Registry(), "[::1]:5000");
}

TEST(ImageReference, PinsKeepingTheTagForPeople) {
  EXPECT_EQ(ParseImageReference(kTrain).PinnedTo(kDigestA), std::string(kTrain) + "@" + kDigestA);
  EXPECT_EQ(ParseImageReference("reg:5000/train").PinnedTo(kDigestA), "reg:5000/train@" + kDigestA);
}

TEST(ImageReference, RefusesDigestsOfOtherAlgorithmsAndMalformedNames) {
  const auto refuses = [](const std::string& image, const std::string& said) {
    try {
      ParseImageReference(image);
      ADD_FAILURE() << image << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(said), std::string::npos) << e.what();
    }
  };
  refuses("train@sha512:" + std::string(128, 'a'), "digest algorithm \"sha512\" is not sha256");
  refuses("train@sha256:" + std::string(63, 'a'), "64 lower-case hex digits");
  refuses("train@sha256:" + std::string(64, 'A'), "64 lower-case hex digits");
  refuses("train@", "64 lower-case hex digits");
  refuses("", "empty");
  refuses("Train:1", "path component \"Train\"");
  refuses("reg/Train:1", "path component \"Train\"");
  refuses("train:", "tag \"\"");
  refuses("train:-x", "tag \"-x\"");
  refuses("train:" + std::string(129, 'x'), "tag");
  refuses("reg:port/train", "registry \"reg:port\"");
  refuses("a//b", "path component \"\"");
  refuses("a__-b", "path component");
  refuses(std::string(300, 'a'), "longer than");
  refuses("x\n:1", "path component \"x?\"");
  EXPECT_FALSE(TryParseImageReference("a b").has_value());
}

TEST(ImageReference, AcceptsTheGrammarsSeparators) {
  for (const char* image : {"a.b/c_d__e-f---g:1", "a-b.c/d.e:1.0_x", "x/y/z/w:v"}) {
    EXPECT_TRUE(TryParseImageReference(image).has_value()) << image;
  }
}

TEST(ImageId, ReadsWhatContainerdAndDockershimReport) {
  const auto containerd = ParseImageId(std::string(kTrainRepository) + "@" + kDigestA);
  ASSERT_TRUE(containerd);
  EXPECT_EQ(containerd->repository, kTrainRepository);
  EXPECT_EQ(containerd->digest, kDigestA);
  const auto dockershim = ParseImageId("docker-pullable://busybox@" + kDigestB);
  ASSERT_TRUE(dockershim);
  EXPECT_EQ(dockershim->repository, "docker.io/library/busybox");
  // A bare config id (an image loaded without a registry) names nothing a pod can pull.
  EXPECT_FALSE(ParseImageId(kDigestA));
  EXPECT_FALSE(ParseImageId(""));
  EXPECT_FALSE(ParseImageId("reg/train@sha512:" + std::string(128, 'a')));
  EXPECT_FALSE(ParseImageId("reg/train:2.4@" + kDigestA));  // an imageID never has a tag
}

TEST(ImagePins, TheAnnotationReadsBackWhatWasWritten) {
  const std::vector<ImagePin> pins{{"sidecar", "reg/side:1", kDigestB, "job-master-0"},
                                   {"pytorch", kTrain, kDigestA, "job-master-0"}};
  const std::string text = WriteImagePins(pins);
  EXPECT_EQ(text.find("pytorch"), text.find('"') + 1) << "sorted by container: " << text;
  const std::vector<ImagePin> read = ReadImagePins(text);
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[0], pins[1]);
  EXPECT_EQ(read[1], pins[0]);
}

TEST(ImagePins, AnUnreadableAnnotationIsAnInputErrorNamingWhy) {
  const auto refuses = [](const std::string& text, const std::string& said) {
    try {
      ReadImagePins(text);
      ADD_FAILURE() << text.substr(0, 80) << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(said), std::string::npos) << e.what();
    }
  };
  refuses("[]", "not a JSON object");
  refuses("{\"c\": 1}", "container c: not an object");
  refuses("{\"c\": {\"image\": \"r/t:1\", \"digest\": \"md5:1\", \"pod\": \"p\"}}",
          "digest is not sha256");
  refuses("{\"c\": {\"image\": \"r/t:1@" + kDigestA + "\", \"digest\": \"" + kDigestA +
              "\", \"pod\": \"p\"}}",
          "has a digest");
  refuses("{\"c\": {\"image\": \"r/t:1\", \"digest\": \"" + kDigestA + "\"}}",
          "\"pod\" is not a string");
  refuses("{\"c\": {\"image\": \"r/t:1\", \"digest\": \"" + kDigestA + "\", \"pod\": \"" +
              std::string(600, 'p') + "\"}}",
          "longer than 512");
  refuses("{", "");  // not JSON
  refuses(std::string(kMaxImagePinsAnnotation + 1, ' '), "longer than");
  refuses(std::string(100, '[') + std::string(100, ']'), "");  // nesting refused while read
  std::string many = "{";
  for (std::size_t i = 0; i <= kMaxImagePins; ++i) {
    many += (i == 0 ? "\"c" : ",\"c") + std::to_string(i) + "\": {\"image\": \"r/t:1\", " +
            "\"digest\": \"" + kDigestA + "\", \"pod\": \"p\"}";
  }
  refuses(many + "}", "more than 64 containers");
}

TEST(PinMode, TheNamespaceLabelOverridesThePolicy) {
  EXPECT_EQ(PinModeIn(PinMode::Pin, nullptr), PinMode::Pin);
  const Json off{{std::string(kImagePinNamespaceLabel), "off"}};
  EXPECT_EQ(PinModeIn(PinMode::Pin, &off), PinMode::Off);
  const Json warn{{std::string(kImagePinNamespaceLabel), "warn"}};
  EXPECT_EQ(PinModeIn(PinMode::Off, &warn), PinMode::Warn);
  const Json bogus{{std::string(kImagePinNamespaceLabel), "sometimes"}};
  EXPECT_EQ(PinModeIn(PinMode::Warn, &bogus), PinMode::Warn);
  EXPECT_EQ(ParsePinMode("pin"), PinMode::Pin);
  EXPECT_FALSE(ParsePinMode("Pin"));
}

// A pod of a job as the controller's cache keeps it: its containers' images and what the kubelet
// says they run.
Json PinPod(const std::string& name, const std::string& created, const std::string& phase,
            const std::string& image, const std::string& image_id,
            const std::string& container = "pytorch") {
  Json pod{{"metadata", {{"name", name}, {"creationTimestamp", created}}},
           {"spec", {{"containers", Json::array({Json{{"name", container}, {"image", image}}})}}},
           {"status", {{"phase", phase}}}};
  if (!image_id.empty()) {
    pod["status"]["containerStatuses"] =
        Json::array({Json{{"name", container}, {"image", image}, {"imageID", image_id}}});
  }
  return pod;
}

std::string Runs(const std::string& digest) { return std::string(kTrainRepository) + "@" + digest; }

TEST(RecordImagePins, TheEarliestPodsDigestIsRecordedOnce) {
  const std::vector<Json> pods{
      PinPod("job-worker-0", "2026-12-07T10:00:05Z", "Running", kTrain, Runs(kDigestB)),
      PinPod("job-master-0", "2026-12-07T10:00:00Z", "Running", kTrain, Runs(kDigestA))};
  const auto recorded = RecordImagePins({}, pods);
  ASSERT_TRUE(recorded);
  ASSERT_EQ(recorded->size(), 1u);
  EXPECT_EQ(recorded->front(), (ImagePin{"pytorch", kTrain, kDigestA, "job-master-0"}));
  // Seen again, nothing changes: the record is not rewritten with a later pod's digest.
  EXPECT_FALSE(RecordImagePins(*recorded, pods));
  const std::vector<Json> replaced{
      PinPod("job-worker-0", "2026-12-07T11:00:00Z", "Running", kTrain, Runs(kDigestC))};
  EXPECT_FALSE(RecordImagePins(*recorded, replaced));
}

TEST(RecordImagePins, NothingToRecordWithoutARegistryDigestOrATag) {
  EXPECT_FALSE(RecordImagePins({}, {PinPod("a", "t", "Pending", kTrain, "")}));  // not pulled yet
  EXPECT_FALSE(RecordImagePins({}, {PinPod("a", "t", "Running", kTrain, kDigestA)}));  // config id
  // Pinned by its user already, or pinned by the webhook: nothing to add.
  const std::string pinned = std::string(kTrain) + "@" + kDigestA;
  EXPECT_FALSE(RecordImagePins({}, {PinPod("a", "t", "Running", pinned, Runs(kDigestA))}));
  // Another registry's name for it (a mirror rewriting the pull): not this reference's digest.
  EXPECT_FALSE(
      RecordImagePins({}, {PinPod("a", "t", "Running", kTrain, "mirror/ml/train@" + kDigestA)}));
  // No tag: the repository's default tag, which the user did not name.
  EXPECT_FALSE(
      RecordImagePins({}, {PinPod("a", "t", "Running", kTrainRepository, Runs(kDigestA))}));
}

TEST(RecordImagePins, APinOutlivesARestartAndGoesWhenTheTemplateChanges) {
  const std::vector<ImagePin> recorded{{"pytorch", kTrain, kDigestA, "job-master-0"}};
  EXPECT_FALSE(RecordImagePins(recorded, {}));  // between a restart's pods
  const std::string pinned = std::string(kTrain) + "@" + kDigestA;
  EXPECT_FALSE(RecordImagePins(recorded, {PinPod("w", "t", "Pending", pinned, "")}));
  // The job's template now names 2.5: the old pin goes, the new image's digest is recorded.
  const std::string next = std::string(kTrainRepository) + ":2.5";
  const auto changed =
      RecordImagePins(recorded, {PinPod("job-master-0", "t", "Running", next, Runs(kDigestC))});
  ASSERT_TRUE(changed);
  ASSERT_EQ(changed->size(), 1u);
  EXPECT_EQ(changed->front(), (ImagePin{"pytorch", next, kDigestC, "job-master-0"}));
}

TEST(RecordImagePins, EachContainerHasItsOwnPin) {
  Json pod = PinPod("p", "t", "Running", kTrain, Runs(kDigestA));
  pod["spec"]["containers"].push_back(Json{{"name", "sidecar"}, {"image", "docker.io/side:1"}});
  pod["status"]["containerStatuses"].push_back(
      Json{{"name", "sidecar"}, {"imageID", "docker.io/library/side@" + kDigestB}});
  const auto recorded = RecordImagePins({}, {pod});
  ASSERT_TRUE(recorded);
  ASSERT_EQ(recorded->size(), 2u);
  EXPECT_EQ((*recorded)[1], (ImagePin{"sidecar", "docker.io/side:1", kDigestB, "p"}));
}

TEST(ImageDrift, NamesEachDigestAndItsPods) {
  const std::vector<Json> pods{
      PinPod("job-master-0", "t", "Running", kTrain, Runs(kDigestA)),
      PinPod("job-worker-0", "t", "Running", kTrain, Runs(kDigestB)),
      PinPod("job-worker-1", "t", "Running", std::string(kTrain) + "@" + kDigestA, Runs(kDigestA)),
      PinPod("job-worker-2", "t", "Failed", kTrain, Runs(kDigestC))};  // not running: not drift
  const std::vector<std::string> lines = ImageDrift(pods);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines.front(), "container pytorch (" + std::string(kTrain) + ") runs " + kDigestA +
                               " in pod job-master-0, pod job-worker-1; " + kDigestB +
                               " in pod job-worker-0");
}

TEST(ImageDrift, OneDigestOrDifferentImagesAreNoDrift) {
  EXPECT_TRUE(ImageDrift({PinPod("a", "t", "Running", kTrain, Runs(kDigestA)),
                          PinPod("b", "t", "Running", kTrain, Runs(kDigestA))})
                  .empty());
  // An MPIJob's launcher and workers may run different images under one container name.
  EXPECT_TRUE(
      ImageDrift({PinPod("a", "t", "Running", kTrain, Runs(kDigestA)),
                  PinPod("b", "t", "Running", "reg/launcher:1", "reg/launcher@" + kDigestB)})
          .empty());
}

TEST(ImageDrift, ALineStaysShortWhateverTheJob) {
  std::vector<Json> pods;
  for (int i = 0; i < 1000; ++i) {
    const std::string hex = std::to_string(i);
    const std::string digest = "sha256:" + std::string(64 - hex.size(), '0') + hex;
    pods.push_back(PinPod("pod-" + std::to_string(i), "t", "Running", kTrain, Runs(digest)));
    pods.push_back(PinPod("twin-" + std::to_string(i), "t", "Running", kTrain, Runs(digest)));
  }
  const std::vector<std::string> lines = ImageDrift(pods);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_LT(lines.front().size(), 1024u) << lines.front();
  EXPECT_NE(lines.front().find("and 996 more digests"), std::string::npos) << lines.front();
}

}  // namespace
}  // namespace ncclguard::core
