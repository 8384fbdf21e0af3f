#include "core/image_ref.h"
#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

// A Pod of a managed job whose container runs by tag the image the job's first pods ran: pinned
// to the digest they ran (name:tag@digest), so a tag pushed again cannot give a replacement pod,
// a restart or an elastic scale-up another NCCL/CUDA build. Only the in-process webhook knows a
// job's digests (the controller's caches): elsewhere the rule finds nothing.
class ImagePinRule final : public Rule {
 public:
  ImagePinRule()
      : Rule({"image-pin", "nccl-version", Level::Fix, RuleScope::Pod,
              "A pod of a running job names its image by tag while the job's first pods ran a "
              "recorded digest of it, so a tag pushed again would start another build beside "
              "them.",
              "The mutating webhook pins the image to the recorded digest (name:tag@digest); "
              "NcclPolicy spec.imagePin or the namespace label ncclguard.io/image-pin chooses "
              "pin, warn or off."}) {}

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    const JobImagePins* pins = ctx.image_pins;
    if (pins == nullptr || pins->mode != PinMode::Pin) return;
    if (ctx.workload.kind != WorkloadKind::Pod) return;
    for (const Container& c : ctx.facts.containers) {
      const auto image = c.Image();
      if (!image) continue;
      const ImagePin* pin = pins->Find(c.name, *image);
      if (pin == nullptr) continue;
      const auto ref = TryParseImageReference(*image);
      if (!ref || !ref->digest.empty()) continue;
      const std::string pinned = ref->PinnedTo(pin->digest);
      // The digest first: admission warnings are cut at 256 characters.
      const std::string whose =
          pin->pod.empty() ? ", which the registry named for tag " + ref->tag + " at admission"
                           : ", the build pod " + pin->pod + " of " + pins->job + " runs";
      report.Add(c.at / "image", ContainerLabel(c) + " pinned to " + pin->digest + whose +
                                     " (image \"" + *image + "\")");
      report.plan().Replace(c.at / "image", pinned);
    }
  }
};

NCCLGUARD_REGISTER(ImagePinRule);

}  // namespace
}  // namespace ncclguard::core::rules
