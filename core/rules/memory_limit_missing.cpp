#include "core/json_access.h"
#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

class MemoryLimitMissing final : public Rule {
 public:
  MemoryLimitMissing()
      : Rule({"memory-limit-missing", "container-oom", Level::Warn, RuleScope::Pod,
              "A GPU container has no memory limit: it is the first the kernel kills under node "
              "memory pressure, and a leak takes the node's other jobs down with it.",
              "Set resources.limits.memory (and a matching request) sized for the data loaders and "
              "pinned host buffers."}) {}

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    for (const Container& c : ctx.facts.containers) {
      if (!c.IsGpu()) continue;
      const Json* limits = OptionalObject(ctx.object, c.at / "resources" / "limits");
      if (limits != nullptr && limits->contains("memory")) continue;
      report.Add(c.at / "resources", ContainerLabel(c) +
                                         " has no memory limit: under memory pressure it is killed "
                                         "first (exit 137). Set resources.limits.memory.");
    }
  }
};

NCCLGUARD_REGISTER(MemoryLimitMissing);

}  // namespace
}  // namespace ncclguard::core::rules
