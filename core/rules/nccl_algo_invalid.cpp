#include <array>

#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

constexpr std::array<std::string_view, 7> kAlgorithms{
    "Ring", "Tree", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT"};

class NcclAlgoInvalid final : public Rule {
 public:
  NcclAlgoInvalid()
      : Rule({"nccl-algo-invalid", "advanced-tuning", Level::Deny, RuleScope::Pod,
              "NCCL_ALGO has a token other than Ring, Tree, CollnetDirect, CollnetChain, NVLS, "
              "NVLSTree or PAT (case-insensitive, optional leading ^; per-collective lists such as "
              "ring;allreduce:tree are read the same way).",
              "Use known algorithm names, or remove NCCL_ALGO and let NCCL's tuner choose."}) {}

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    ForEachLiteralEnv(
        ctx.facts, "NCCL_ALGO",
        [&](const Container& c, const std::string& value, const JsonPointer& path) {
          const auto unknown = FirstUnknownNcclName(value, kAlgorithms);
          if (!unknown) return;
          report.Add(
              path,
              ContainerLabel(c) + ": NCCL_ALGO=\"" + value + "\" has the unknown algorithm \"" +
                  *unknown +
                  "\". Use Ring, Tree, CollnetDirect, CollnetChain, NVLS, NVLSTree or PAT, or "
                  "remove NCCL_ALGO.");
        });
  }
};

NCCLGUARD_REGISTER(NcclAlgoInvalid);

}  // namespace
}  // namespace ncclguard::core::rules
