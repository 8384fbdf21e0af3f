// The image pin in the admission webhook (core/image_pin.h): a Pod of a job with recorded digests
// is pinned on CREATE (enforce), said as "would fix" (audit), warned about (warn mode); the lookup
// is asked with the request's namespace and the policy's mode, and one that fails pins nothing.
#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/image_pin.h"
#include "tests/unit/test_support.h"
#include "webhook/admission_handler.h"

namespace ncclguard::webhook::pin_test {
namespace {

using core::Json;

constexpr const char* kTag = "registry.ncclguard.test:5000/ml/train:2.4";
const std::string kDigest = "sha256:" + std::string(64, 'd');

Json PinnedJobsPod() {
  Json pod = test::CompliantPod();
  pod["metadata"]["labels"]["training.kubeflow.org/job-name"] = "pin";
  pod["spec"]["containers"][0]["image"] = kTag;
  return pod;
}

AdmissionRequest CreateRequest(Json pod) {
  AdmissionRequest request;
  request.uid = "uid-pin";
  request.kind.version = "v1";
  request.kind.kind = "Pod";
  request.operation = "CREATE";
  request.namespace_ = "team-a";
  request.name = pod["metadata"].value("name", "");
  request.object = std::move(pod);
  return request;
}

std::string JoinedWarnings(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

// The patch's operation on the container's image, null when there is none.
Json ImageOp(const Json& patch) {
  if (!patch.is_array()) return nullptr;
  for (const Json& op : patch) {
    if (op.value("path", "") == "/spec/containers/0/image") return op;
  }
  return nullptr;
}

struct Asked {
  std::string namespace_;
  std::optional<core::PinMode> mode;
  int calls = 0;
};

AdmitOptions RecordedIn(Asked& asked, core::PinMode mode_in_namespace = core::PinMode::Pin) {
  AdmitOptions options;
  options.image_pins = [&asked, mode_in_namespace](
                           const Json& pod, std::string_view ns,
                           core::PinMode policy_mode) -> std::optional<core::JobImagePins> {
    ++asked.calls;
    asked.namespace_ = std::string(ns);
    asked.mode = policy_mode;
    if (pod["metadata"]["labels"].value("training.kubeflow.org/job-name", "") != "pin") {
      return std::nullopt;
    }
    return core::JobImagePins{
        mode_in_namespace, "PyTorchJob pin", {{"pytorch", kTag, kDigest, "pin-master-0"}}};
  };
  return options;
}

TEST(AdmissionPin, EnforcePinsTheJobsLaterPod) {
  Asked asked;
  const AdmissionOutcome outcome = Admit(Endpoint::Mutate, CreateRequest(PinnedJobsPod()),
                                         core::Policy::Defaults(), RecordedIn(asked));
  EXPECT_EQ(outcome.result, AdmitResult::Patched);
  EXPECT_EQ(ImageOp(outcome.response.patch), (Json{{"op", "replace"},
                                                   {"path", "/spec/containers/0/image"},
                                                   {"value", std::string(kTag) + "@" + kDigest}}));
  EXPECT_EQ(asked.namespace_, "team-a");
  EXPECT_EQ(asked.mode, core::PinMode::Pin);
}

TEST(AdmissionPin, ThePolicysModeIsWhatTheLookupIsAskedWith) {
  Asked asked;
  core::Policy policy = core::Policy::Defaults();
  policy.image_pin = core::PinMode::Warn;
  Admit(Endpoint::Mutate, CreateRequest(PinnedJobsPod()), policy,
        RecordedIn(asked, core::PinMode::Warn));
  EXPECT_EQ(asked.mode, core::PinMode::Warn);
}

TEST(AdmissionPin, WarnModeAdmitsUnchangedWithAWarning) {
  Asked asked;
  const AdmissionOutcome mutated =
      Admit(Endpoint::Mutate, CreateRequest(PinnedJobsPod()), core::Policy::Defaults(),
            RecordedIn(asked, core::PinMode::Warn));
  EXPECT_TRUE(ImageOp(mutated.response.patch).is_null());
  const AdmissionOutcome validated =
      Admit(Endpoint::Validate, CreateRequest(PinnedJobsPod()), core::Policy::Defaults(),
            RecordedIn(asked, core::PinMode::Warn));
  EXPECT_TRUE(validated.response.allowed);
  bool warned = false;
  for (const std::string& warning : validated.response.warnings) {
    warned = warned || (warning.find("image-unpinned") != std::string::npos &&
                        warning.find(kDigest) != std::string::npos);
  }
  EXPECT_TRUE(warned) << JoinedWarnings(validated.response.warnings);
}

TEST(AdmissionPin, AuditModeSaysItWouldPin) {
  Asked asked;
  const AdmissionOutcome mutated =
      Admit(Endpoint::Mutate, CreateRequest(PinnedJobsPod()), core::Policy::Defaults(),
            RecordedIn(asked), core::Mode::Audit);
  EXPECT_TRUE(mutated.response.patch.is_null() || mutated.response.patch.empty());
  const AdmissionOutcome validated =
      Admit(Endpoint::Validate, CreateRequest(PinnedJobsPod()), core::Policy::Defaults(),
            RecordedIn(asked), core::Mode::Audit);
  bool would = false;
  for (const std::string& warning : validated.response.warnings) {
    would = would || (warning.find("would fix") != std::string::npos &&
                      warning.find("image-pin") != std::string::npos);
  }
  EXPECT_TRUE(would) << JoinedWarnings(validated.response.warnings);
}

TEST(AdmissionPin, OnlyAPodsCreateIsPinned) {
  Asked asked;
  AdmissionRequest update = CreateRequest(PinnedJobsPod());
  update.operation = "UPDATE";
  update.old_object = PinnedJobsPod();
  Admit(Endpoint::Mutate, std::move(update), core::Policy::Defaults(), RecordedIn(asked));
  EXPECT_EQ(asked.calls, 0);
}

TEST(AdmissionPin, ALookupThatFailsPinsNothingAndAdmits) {
  AdmitOptions options;
  options.image_pins = [](const Json&, std::string_view,
                          core::PinMode) -> std::optional<core::JobImagePins> {
    throw std::runtime_error("caches gone");
  };
  const AdmissionOutcome outcome =
      Admit(Endpoint::Mutate, CreateRequest(PinnedJobsPod()), core::Policy::Defaults(), options);
  EXPECT_TRUE(outcome.response.allowed);
  EXPECT_TRUE(ImageOp(outcome.response.patch).is_null());
}

// A job with no record yet (its first pods), and a registry that names `digest` for any tag.
struct Registry {
  int asked = 0;
  std::optional<std::string> digest;
};

AdmitOptions FirstPods(Registry& registry, core::PinMode mode = core::PinMode::Pin) {
  AdmitOptions options;
  options.image_pins = [mode](const Json&, std::string_view,
                              core::PinMode) -> std::optional<core::JobImagePins> {
    return core::JobImagePins{mode, "PyTorchJob pin", {}};
  };
  options.resolve_digest = [&registry](const core::ImageReference& image, const Json&,
                                       std::string_view ns,
                                       std::string& why) -> std::optional<std::string> {
    ++registry.asked;
    EXPECT_EQ(ns, "team-a");
    EXPECT_EQ(image.tag, "2.4");
    if (!registry.digest) why = "TimedOut: registry.ncclguard.test:5000 did not answer in 1500 ms";
    return registry.digest;
  };
  return options;
}

TEST(AdmissionPin, AJobsFirstPodIsPinnedToTheDigestTheRegistryNamesAtAdmission) {
  Registry registry{0, kDigest};
  const AdmissionOutcome outcome = Admit(Endpoint::Mutate, CreateRequest(PinnedJobsPod()),
                                         core::Policy::Defaults(), FirstPods(registry));
  EXPECT_EQ(registry.asked, 1);
  EXPECT_EQ(ImageOp(outcome.response.patch)["value"], std::string(kTag) + "@" + kDigest);
  bool said = false;
  for (const core::Finding& f : outcome.findings) {
    said = said ||
           f.message.find("which the registry named for tag 2.4 at admission") != std::string::npos;
  }
  EXPECT_TRUE(said);
}

TEST(AdmissionPin, ARegistryThatDoesNotAnswerLeavesThePodUnpinnedWithAWarning) {
  Registry registry;
  const AdmissionOutcome outcome = Admit(Endpoint::Mutate, CreateRequest(PinnedJobsPod()),
                                         core::Policy::Defaults(), FirstPods(registry));
  EXPECT_TRUE(outcome.response.allowed);
  EXPECT_TRUE(ImageOp(outcome.response.patch).is_null());
  ASSERT_FALSE(outcome.response.warnings.empty());
  const std::string& warning = outcome.response.warnings.back();
  EXPECT_NE(warning.find("not resolved at admission (TimedOut"), std::string::npos) << warning;
  EXPECT_LE(warning.size(), 256u);
}

TEST(AdmissionPin, TheRegistryIsAskedOnlyByTheMutatingWebhookInEnforceModeWithPinOn) {
  Registry registry{0, kDigest};
  Admit(Endpoint::Validate, CreateRequest(PinnedJobsPod()), core::Policy::Defaults(),
        FirstPods(registry));
  Admit(Endpoint::Mutate, CreateRequest(PinnedJobsPod()), core::Policy::Defaults(),
        FirstPods(registry), core::Mode::Audit);
  Admit(Endpoint::Mutate, CreateRequest(PinnedJobsPod()), core::Policy::Defaults(),
        FirstPods(registry, core::PinMode::Warn));
  EXPECT_EQ(registry.asked, 0);
  // A recorded digest is not asked again.
  Asked asked;
  AdmitOptions recorded = RecordedIn(asked);
  recorded.resolve_digest = FirstPods(registry).resolve_digest;
  Admit(Endpoint::Mutate, CreateRequest(PinnedJobsPod()), core::Policy::Defaults(), recorded);
  EXPECT_EQ(registry.asked, 0);
}

TEST(AdmissionPin, AtMostTwoContainersAPodAreResolved) {
  Registry registry{0, kDigest};
  Json pod = PinnedJobsPod();
  for (int i = 1; i < 5; ++i) {
    Json sidecar = pod["spec"]["containers"][0];
    sidecar["name"] = "side-" + std::to_string(i);
    pod["spec"]["containers"].push_back(sidecar);
  }
  const AdmissionOutcome outcome = Admit(Endpoint::Mutate, CreateRequest(std::move(pod)),
                                         core::Policy::Defaults(), FirstPods(registry));
  EXPECT_EQ(registry.asked, 2);
  bool said = false;
  for (const std::string& warning : outcome.response.warnings) {
    said = said || warning.find("not resolved at admission: at most 2 a pod") != std::string::npos;
  }
  EXPECT_TRUE(said) << JoinedWarnings(outcome.response.warnings);
}

}  // namespace
}  // namespace ncclguard::webhook::pin_test
