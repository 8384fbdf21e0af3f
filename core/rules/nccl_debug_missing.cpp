#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

// The log diagnoses (NcclTransport, efa-tcp-fallback, memlock, versions) read what NCCL prints at
// INFO level for its INIT and NET subsystems; at the default (WARN) it says nothing of them.
class NcclDebugMissing final : public Rule {
 public:
  NcclDebugMissing()
      : Rule({"nccl-debug-missing", "efa-tcp-fallback", Level::Fix, RuleScope::Pod,
              "A distributed training container (a GPU container of a multi-pod job, an EFA "
              "container, or one with MASTER_ADDR/WORLD_SIZE) sets no NCCL_DEBUG, so NCCL does "
              "not print which network it uses and a fallback to TCP sockets goes unseen.",
              "Set NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,NET (a few hundred lines at start "
              "up); the mutating webhook adds them and keeps any value you set. Turn it off in "
              "the NcclPolicy: rules: {nccl-debug-missing: {enabled: false}}."}) {}

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    for (const Container& c : ctx.facts.containers) {
      if (!DistributedTrainingContainer(ctx, c) || c.Env("NCCL_DEBUG")) continue;
      const bool subsys = c.Env("NCCL_DEBUG_SUBSYS").has_value();
      report.Add(c.at / "env",
                 ContainerLabel(c) +
                     " sets no NCCL_DEBUG: NCCL will not say whether it uses EFA or TCP sockets. "
                     "Set NCCL_DEBUG=INFO" +
                     (subsys ? std::string(".") : std::string(" and NCCL_DEBUG_SUBSYS=INIT,NET.")));
      report.plan().Append(c.at / "env", Json{{"name", "NCCL_DEBUG"}, {"value", "INFO"}});
      if (!subsys) {
        report.plan().Append(c.at / "env",
                             Json{{"name", "NCCL_DEBUG_SUBSYS"}, {"value", "INIT,NET"}});
      }
    }
  }
};

NCCLGUARD_REGISTER(NcclDebugMissing);

}  // namespace
}  // namespace ncclguard::core::rules
