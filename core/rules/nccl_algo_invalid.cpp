#include <array>

#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

constexpr std::array<std::string_view, 7> kAlgorithms{
    "Ring", "Tree", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT"};

// The first token of `list` (an optional leading ^, then a comma list) that is no algorithm.
std::optional<std::string> UnknownAlgorithm(std::string_view list) {
  if (!list.empty() && list.front() == '^') list.remove_prefix(1);
  for (const std::string& token : Split(list, ',')) {
    const bool known = std::any_of(kAlgorithms.begin(), kAlgorithms.end(),
                                   [&](std::string_view a) { return EqualsIgnoreCase(a, token); });
    if (!known) return token;
  }
  return std::nullopt;
}

class NcclAlgoInvalid final : public Rule {
 public:
  NcclAlgoInvalid()
      : Rule({"nccl-algo-invalid", "advanced-tuning", Level::Deny, RuleScope::Pod,
              "NCCL_ALGO has a token other than Ring, Tree, CollnetDirect, CollnetChain, NVLS, "
              "NVLSTree or PAT (case-insensitive, optional leading ^; per-collective lists such as "
              "allreduce:tree;allgather:ring are read the same way).",
              "Use known algorithm names, or remove NCCL_ALGO and let NCCL's tuner choose."}) {}

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    ForEachLiteralEnv(
        ctx.facts, "NCCL_ALGO",
        [&](const Container& c, const std::string& value, const JsonPointer& path) {
          if (value.empty()) return;
          std::optional<std::string> unknown;
          if (value.find(':') == std::string::npos) {
            unknown = UnknownAlgorithm(value);
          } else {
            for (const std::string& part : Split(value, ';')) {
              const auto colon = part.find(':');
              unknown = colon == std::string::npos
                            ? std::optional<std::string>(part)
                            : UnknownAlgorithm(std::string_view(part).substr(colon + 1));
              if (unknown) break;
            }
          }
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

NCCLGUARD_REGISTER_RULE(NcclAlgoInvalid);

}  // namespace
}  // namespace ncclguard::core::rules
