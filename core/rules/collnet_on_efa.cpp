#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

class CollnetOnEfa final : public Rule {
 public:
  CollnetOnEfa()
      : Rule({"collnet-on-efa", "advanced-tuning", Level::Warn, RuleScope::Pod,
              "NCCL_COLLNET_ENABLE=1 on an EFA pod: EFA has no in-network reduction (SHARP), so "
              "CollNet only adds setup cost or fails to initialise.",
              "Remove NCCL_COLLNET_ENABLE or set it to 0."}) {}

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    if (!ctx.facts.IsEfaPod()) return;
    ForEachLiteralEnv(ctx.facts, "NCCL_COLLNET_ENABLE",
                      [&](const Container& c, const std::string& value, const JsonPointer& path) {
                        if (value != "1") return;
                        report.Add(path, ContainerLabel(c) +
                                             " sets NCCL_COLLNET_ENABLE=1 but EFA has no CollNet "
                                             "support. Remove it or set it to 0.");
                      });
  }
};

NCCLGUARD_REGISTER(CollnetOnEfa);

}  // namespace
}  // namespace ncclguard::core::rules
