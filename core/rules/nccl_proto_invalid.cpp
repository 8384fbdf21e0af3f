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
              "excludes the listed ones; per-collective lists such as LL,Simple;allreduce:^LL are "
              "read the same way). NCCL rejects the value at init.",
              "Use a comma list of LL, LL128, Simple, or remove NCCL_PROTO and let NCCL choose."}) {
  }

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    ForEachLiteralEnv(
        ctx.facts, "NCCL_PROTO",
        [&](const Container& c, const std::string& value, const JsonPointer& path) {
          const auto unknown = FirstUnknownNcclName(value, kProtocols);
          if (!unknown) return;
          report.Add(path,
                     ContainerLabel(c) + ": NCCL_PROTO=\"" + value +
                         "\" has the unknown protocol \"" + *unknown +
                         "\". Use LL, LL128 or Simple (comma-separated, optional leading ^), or "
                         "remove NCCL_PROTO.");
        });
  }
};

NCCLGUARD_REGISTER(NcclProtoInvalid);

}  // namespace
}  // namespace ncclguard::core::rules
