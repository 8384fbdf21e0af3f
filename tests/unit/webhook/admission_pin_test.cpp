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

}  // namespace
}  // namespace ncclguard::webhook::pin_test
