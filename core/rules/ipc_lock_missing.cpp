#include "core/json_access.h"
#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

class IpcLockMissing final : public Rule {
 public:
  IpcLockMissing()
      : Rule({"ipc-lock-missing", "memlock", Level::Fix, RuleScope::Pod,
              "An EFA container lacks the IPC_LOCK capability, so RDMA memory registration "
              "(fi_mr_reg) fails once it exceeds the memlock limit.",
              "Add IPC_LOCK to securityContext.capabilities.add; the mutating webhook adds it."}) {}

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    for (const Container& c : ctx.facts.containers) {
      if (!ctx.facts.IsEfaContainer(c)) continue;
      if (OptionalBool(ctx.object, c.at / "securityContext" / "privileged").value_or(false))
        continue;
      const JsonPointer add_at = c.at / "securityContext" / "capabilities" / "add";
      bool has = false;
      if (const Json* add = OptionalArray(ctx.object, add_at)) {
        for (const Json& cap : *add) {
          has = has || (cap.is_string() && (cap == "IPC_LOCK" || cap == "CAP_IPC_LOCK"));
        }
      }
      if (has) continue;
      report.Add(
          c.at / "securityContext",
          ContainerLabel(c) +
              " uses EFA but lacks the IPC_LOCK capability: RDMA memory registration will fail. "
              "Add IPC_LOCK to securityContext.capabilities.add.");
      report.plan().Append(add_at, "IPC_LOCK");
    }
  }
};

NCCLGUARD_REGISTER(IpcLockMissing);

}  // namespace
}  // namespace ncclguard::core::rules
