#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

class FiProviderWithoutEfa final : public Rule {
 public:
  FiProviderWithoutEfa()
      : Rule({"fi-provider-without-efa", "efa-tcp-fallback", Level::Deny, RuleScope::Pod,
              "A container sets FI_PROVIDER=efa but requests no EFA device and none can be added "
              "(not a GPU container on a known EFA instance type): libfabric finds no EFA device.",
              "Run it on an EFA instance type and request vpc.amazonaws.com/efa, or remove "
              "FI_PROVIDER=efa."}) {}

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    ForEachLiteralEnv(
        ctx.facts, "FI_PROVIDER",
        [&](const Container& c, const std::string& value, const JsonPointer& path) {
          if (value != "efa" || c.efa.value_or(0) > 0) return;
          report.Add(
              path, ContainerLabel(c) + " sets FI_PROVIDER=efa but requests no " +
                        std::string(kEfaResource) +
                        " and none can be added: libfabric will find no EFA device. Schedule it on "
                        "an EFA instance type with a vpc.amazonaws.com/efa request, or remove "
                        "FI_PROVIDER.");
        });
  }
};

NCCLGUARD_REGISTER(FiProviderWithoutEfa);

}  // namespace
}  // namespace ncclguard::core::rules
