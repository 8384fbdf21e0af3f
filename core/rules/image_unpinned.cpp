#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

// The tag of an image reference, "" when it has none ("registry:5000/repo" has no tag).
std::string Tag(std::string_view image) {
  const auto slash = image.rfind('/');
  const std::string_view last = slash == std::string_view::npos ? image : image.substr(slash + 1);
  const auto colon = last.find(':');
  return colon == std::string_view::npos ? std::string() : std::string(last.substr(colon + 1));
}

class ImageUnpinned final : public Rule {
 public:
  ImageUnpinned()
      : Rule({"image-unpinned", "nccl-version", Level::Warn, RuleScope::Pod,
              "An image uses :latest or no tag or digest, so replicas started at different times "
              "may pull different NCCL/CUDA builds; with NcclPolicy spec.imagePin: warn, also a "
              "pod that runs by tag an image whose digest its job recorded.",
              "Pin the image by digest (image@sha256:...) or an immutable version tag, or leave "
              "spec.imagePin at pin so the webhook pins a job's later pods."}) {}

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    for (const Container& c : ctx.facts.containers) {
      const auto image = c.Image();
      if (!image || image->empty() || image->find('@') != std::string::npos) continue;
      // NcclPolicy spec.imagePin: warn (rule image-pin pins in mode pin): the job's first pods
      // ran a recorded digest of this image.
      const JobImagePins* pins = ctx.image_pins;
      if (const ImagePin* pin = pins != nullptr && pins->mode == PinMode::Warn &&
                                        ctx.workload.kind == WorkloadKind::Pod
                                    ? pins->Find(c.name, *image)
                                    : nullptr) {
        // The digest first: admission warnings are cut at 256 characters.
        report.Add(c.at / "image", ContainerLabel(c) + ": the job's pods run " + pin->digest +
                                       "; by tag this pod may pull another build (pod " + pin->pod +
                                       " of " + pins->job + " ran it; image \"" + *image + "\")");
        continue;
      }
      const std::string tag = Tag(*image);
      if (!tag.empty() && tag != "latest") continue;
      report.Add(c.at / "image", ContainerLabel(c) + " image \"" + *image + "\" " +
                                     (tag.empty() ? "has no tag" : "uses :latest") +
                                     ": replicas may run different builds. Pin it by digest or a "
                                     "version tag.");
    }
  }
};

NCCLGUARD_REGISTER(ImageUnpinned);

}  // namespace
}  // namespace ncclguard::core::rules
