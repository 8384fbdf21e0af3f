#include <array>

#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

struct Replacement {
  std::string_view old_name;
  std::string_view new_name;
};

constexpr std::array<Replacement, 3> kReplacements{{
    {"NCCL_MIN_NCHANNELS", "NCCL_MIN_CTAS"},
    {"NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS"},
    {"NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING"},
}};

class NcclEnvDeprecated final : public Rule {
 public:
  NcclEnvDeprecated()
      : Rule({"nccl-env-deprecated", "advanced-tuning", Level::Warn, RuleScope::Pod,
              "A deprecated variable is set: NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS (now "
              "NCCL_MIN_CTAS / NCCL_MAX_CTAS) or NCCL_ASYNC_ERROR_HANDLING (now "
              "TORCH_NCCL_ASYNC_ERROR_HANDLING); newer releases ignore them.",
              "Rename the variable to its replacement."}) {}

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    for (const Container& c : ctx.facts.containers) {
      for (const Replacement& r : kReplacements) {
        const auto env = c.Env(r.old_name);
        if (!env) continue;
        report.Add(EnvPath(c, env->index), ContainerLabel(c) + " sets " + std::string(r.old_name) +
                                               ", which is deprecated and may be ignored. Use " +
                                               std::string(r.new_name) + " instead.");
      }
    }
  }
};

NCCLGUARD_REGISTER(NcclEnvDeprecated);

}  // namespace
}  // namespace ncclguard::core::rules
