#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

class EfaCountMismatch final : public Rule {
 public:
  EfaCountMismatch()
      : Rule({"efa-count-mismatch", "efa-config", Level::Deny, RuleScope::Pod,
              "A GPU container requests a different number of EFA devices than its share of the "
              "instance type's (EFA count x GPUs requested / GPUs per node).",
              "Request exactly the expected vpc.amazonaws.com/efa count, or remove the request and "
              "let the mutating webhook set it."}) {}

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    const TemplateFacts& facts = ctx.facts;
    for (const Container& c : facts.containers) {
      const auto expected = facts.ExpectedEfa(c);
      if (!c.efa || !expected || *c.efa == *expected) continue;
      report.Add(c.at / "resources",
                 ContainerLabel(c) + " requests " + std::to_string(*c.efa) + " " +
                     std::string(kEfaResource) + " but " + std::to_string(c.gpus) + " GPU(s) on " +
                     *facts.instance_type_name + " (" +
                     std::to_string(facts.instance_type->efa_devices) + " EFA / " +
                     std::to_string(facts.instance_type->gpus) + " GPUs" +
                     CatalogSourceNote(*facts.instance_type) + ") need " +
                     std::to_string(*expected) + ". Set " + std::string(kEfaResource) + ": " +
                     std::to_string(*expected) + " in requests and limits.");
    }
  }
};

NCCLGUARD_REGISTER(EfaCountMismatch);

}  // namespace
}  // namespace ncclguard::core::rules
