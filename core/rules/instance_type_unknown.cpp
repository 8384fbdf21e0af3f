#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

class InstanceTypeUnknown final : public Rule {
 public:
  InstanceTypeUnknown()
      : Rule(
            {"instance-type-unknown", "efa-config", Level::Warn, RuleScope::Pod,
             "A GPU or EFA pod does not say which instance type it runs on (nodeSelector or a "
             "required nodeAffinity on node.kubernetes.io/instance-type) and the policy has no "
             "default, so EFA resources cannot be checked or added.",
             "Add nodeSelector node.kubernetes.io/instance-type: <type> (e.g. p5.48xlarge), or set "
             "defaultInstanceType in the NcclPolicy."}) {}

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    const TemplateFacts& facts = ctx.facts;
    if (facts.instance_type_name || !(facts.HasGpuContainer() || facts.RequestsEfa())) return;
    // A TrainJob judged without its runtime: the runtime usually pins the type.
    if (ctx.workload.runtime_missing) return;
    report.Add(
        facts.pod_spec / "nodeSelector",
        "GPU pod template" + (facts.tmpl->role.empty() ? std::string() : " " + facts.tmpl->role) +
            " has no node.kubernetes.io/instance-type in nodeSelector or required nodeAffinity: "
            "EFA resources cannot be checked. Pin the instance type, e.g. nodeSelector "
            "node.kubernetes.io/instance-type: p5.48xlarge.");
  }
};

NCCLGUARD_REGISTER(InstanceTypeUnknown);

}  // namespace
}  // namespace ncclguard::core::rules
