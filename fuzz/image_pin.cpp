// The image pin's parsers (core/image_ref.h, core/image_pin.h): a pod's image reference (the
// webhook and the controller), the imageID a kubelet reports, and a job's
// ncclguard.io/image-digests annotation (users can edit it). The first byte picks which. Callers
// catch core::InputError (a reference or an annotation they cannot read); ParseImageId never
// throws. Properties: a reference that parses reads back the same from WithoutDigest and from
// PinnedTo a digest, its Repository is stable; an annotation that reads writes back to one that
// reads the same.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/errors.h"
#include "core/image_pin.h"
#include "core/image_ref.h"
#include "fuzz/fuzz_support.h"

namespace {

using namespace ncclguard;

const std::string kDigest = "sha256:" + std::string(64, 'e');

void Reference(std::string_view text) {
  core::ImageReference ref;
  try {
    ref = core::ParseImageReference(text);
  } catch (const core::InputError& e) {
    fuzz::Require(*e.what() != '\0', "a refused reference says why");
    return;
  }
  fuzz::Require(ref.digest.empty() || core::IsSha256Digest(ref.digest), "only sha256 digests");
  const core::ImageReference bare = core::ParseImageReference(ref.WithoutDigest());
  fuzz::Require(bare.Name() == ref.Name() && bare.tag == ref.tag && bare.digest.empty(),
                "the reference without its digest reads back the same", std::string(text));
  const core::ImageReference pinned = core::ParseImageReference(ref.PinnedTo(kDigest));
  fuzz::Require(pinned.Repository() == ref.Repository() && pinned.digest == kDigest,
                "a pinned reference names the same repository", std::string(text));
  const auto id = core::ParseImageId(ref.Name() + "@" + kDigest);
  fuzz::Require(id && id->repository == ref.Repository() && id->digest == kDigest,
                "an imageID of the reference's name reads as its repository", std::string(text));
}

void Annotation(std::string_view text) {
  std::vector<core::ImagePin> pins;
  try {
    pins = core::ReadImagePins(text);
  } catch (const core::InputError& e) {
    fuzz::Require(*e.what() != '\0', "an unreadable record says why");
    return;
  }
  fuzz::Require(pins.size() <= core::kMaxImagePins, "a record is bounded");
  const std::vector<core::ImagePin> again = core::ReadImagePins(core::WriteImagePins(pins));
  fuzz::Require(again.size() == pins.size(), "a record written back reads the same");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      Reference(text);
      break;
    case 1:
      Annotation(text);
      break;
    default:
      (void)core::ParseImageId(text);
      break;
  }
  return 0;
}
