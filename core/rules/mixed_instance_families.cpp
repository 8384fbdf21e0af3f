#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

class MixedInstanceFamilies final : public Rule {
 public:
  MixedInstanceFamilies()
      : Rule(
            {"mixed-instance-families", "advanced-tuning", Level::Deny, RuleScope::Job,
             "Replicas of one job target different instance families (e.g. p4d and p5): different "
             "GPUs, EFA counts and NVLink topologies make NCCL pick mismatched algorithms, and the "
             "job runs at the slowest node's speed or hangs.",
             "Pin every GPU replica to one instance type with nodeSelector "
             "node.kubernetes.io/instance-type."}) {}

  void CheckJob(const JobContext& ctx, RuleReport& report) const override {
    const TemplateFacts* first = nullptr;
    for (const TemplateFacts& facts : ctx.templates) {
      if (!facts.HasGpuContainer() || !facts.instance_type_name) continue;
      if (first == nullptr) {
        first = &facts;
        continue;
      }
      if (InstanceFamily(*facts.instance_type_name) == InstanceFamily(*first->instance_type_name))
        continue;
      report.Add(facts.pod_spec,
                 "replica " + facts.tmpl->role + " targets " + *facts.instance_type_name +
                     " but replica " + first->tmpl->role + " targets " +
                     *first->instance_type_name +
                     ": one job must not mix instance families. Pin all replicas to one "
                     "instance type.");
    }
  }
};

NCCLGUARD_REGISTER(MixedInstanceFamilies);

}  // namespace
}  // namespace ncclguard::core::rules
