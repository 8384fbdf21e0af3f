#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

// The container that runs training in a template: the first GPU container, else the kind's
// conventional training container (a PyTorchJob's "pytorch").
const Container* TrainingContainer(const TemplateFacts& facts, WorkloadKind kind) {
  for (const Container& c : facts.containers) {
    if (c.IsGpu()) return &c;
  }
  const std::string_view conventional = KindInfoOf(kind).training_container;
  if (!conventional.empty()) {
    for (const Container& c : facts.containers) {
      if (c.name == conventional) return &c;
    }
  }
  return nullptr;
}

class ImageMismatch final : public Rule {
 public:
  ImageMismatch()
      : Rule({"image-mismatch", "nccl-version", Level::Deny, RuleScope::Job,
              "Replica templates of one job run different images in their training container, so "
              "ranks may load different NCCL/CUDA/PyTorch builds and hang or corrupt results.",
              "Use the same image (ideally pinned by digest) in every replica's training "
              "container."}) {}

  void CheckJob(const JobContext& ctx, RuleReport& report) const override {
    const TemplateFacts* first = nullptr;
    std::string first_image;
    for (const TemplateFacts& facts : ctx.templates) {
      const Container* c = TrainingContainer(facts, ctx.workload.kind);
      if (c == nullptr) continue;
      const auto image = c->Image();
      if (!image) continue;
      if (first == nullptr) {
        first = &facts;
        first_image = *image;
        continue;
      }
      if (*image == first_image) continue;
      report.Add(c->at / "image",
                 "replica " + facts.tmpl->role + " runs " + *image + " but replica " +
                     first->tmpl->role + " runs " + first_image +
                     ": all ranks must run the same image. Use one image everywhere.");
    }
  }
};

NCCLGUARD_REGISTER(ImageMismatch);

}  // namespace
}  // namespace ncclguard::core::rules
