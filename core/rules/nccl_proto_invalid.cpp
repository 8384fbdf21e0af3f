#include <array>

#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

constexpr std::array<std::string_view, 3> kProtocols{"LL", "LL128", "Simple"};

class NcclProtoInvalid final : public Rule {
 public:
  NcclProtoInvalid()
      : Rule({"nccl-proto-invalid", "efa-config", Level::Deny, RuleScope::Pod,
              "NCCL_PROTO has a token other than LL, LL128 or Simple (an optional leading ^ "
              "excludes the listed ones). NCCL rejects the value at init.",
              "Use a comma list of LL, LL128, Simple, or remove NCCL_PROTO and let NCCL choose."}) {
  }

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    ForEachLiteralEnv(
        ctx.facts, "NCCL_PROTO",
        [&](const Container& c, const std::string& value, const JsonPointer& path) {
          if (value.empty()) return;
          std::string_view list = value;
          if (list.front() == '^') list.remove_prefix(1);
          for (const std::string& token : Split(list, ',')) {
            const bool known =
                std::any_of(kProtocols.begin(), kProtocols.end(),
                            [&](std::string_view p) { return EqualsIgnoreCase(p, token); });
            if (known) continue;
            report.Add(path,
                       ContainerLabel(c) + ": NCCL_PROTO=\"" + value +
                           "\" has the unknown protocol \"" + token +
                           "\". Use LL, LL128 or Simple (comma-separated, optional leading ^), "
                           "or remove NCCL_PROTO.");
            return;
          }
        });
  }
};

NCCLGUARD_REGISTER_RULE(NcclProtoInvalid);

}  // namespace
}  // namespace ncclguard::core::rules
