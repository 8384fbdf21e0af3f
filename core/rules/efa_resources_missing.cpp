#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

class EfaResourcesMissing final : public Rule {
 public:
  EfaResourcesMissing()
      : Rule({"efa-resources-missing", "efa-tcp-fallback", Level::Fix, RuleScope::Pod,
              "A GPU container on an EFA instance type does not request vpc.amazonaws.com/efa, so "
              "NCCL silently falls back to TCP sockets (10-100x slower).",
              "Request vpc.amazonaws.com/efa (requests = limits) = the instance type's EFA count x "
              "GPUs requested / GPUs per node; the mutating webhook adds it."}) {}

  // The other EFA fixes (IPC_LOCK, libfabric env) apply to containers that request EFA.
  int FixOrder() const override { return -1; }

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    const TemplateFacts& facts = ctx.facts;
    if (facts.instance_type == nullptr || facts.instance_type->efa_devices == 0) return;
    for (const Container& c : facts.containers) {
      if (!c.IsGpu() || c.efa) continue;
      const std::int64_t expected = facts.ExpectedEfa(c).value_or(0);
      if (expected == 0) continue;
      const std::string count = std::to_string(expected);
      report.Add(c.at / "resources",
                 ContainerLabel(c) + " requests " + std::to_string(c.gpus) + " GPU(s) on " +
                     *facts.instance_type_name + " but no " + std::string(kEfaResource) +
                     ": NCCL would fall back to TCP. Add " + std::string(kEfaResource) + ": " +
                     count + " to its requests and limits.");
      const std::string resource(kEfaResource);
      report.plan().Add(c.at / "resources" / "requests" / resource, count);
      report.plan().Add(c.at / "resources" / "limits" / resource, count);
    }
  }
};

NCCLGUARD_REGISTER(EfaResourcesMissing);

}  // namespace
}  // namespace ncclguard::core::rules
