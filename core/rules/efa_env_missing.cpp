#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

class EfaEnvMissing final : public Rule {
 public:
  EfaEnvMissing()
      : Rule(
            {"efa-env-missing", "efa-config", Level::Fix, RuleScope::Pod,
             "An EFA container lacks FI_PROVIDER=efa, FI_EFA_USE_DEVICE_RDMA=1 (GPUDirect-RDMA "
             "instance types) or NCCL_SOCKET_IFNAME. Containers with envFrom are left alone: the "
             "variables may come from there.",
             "Set the variables in the container's env; the mutating webhook adds the missing ones "
             "(NCCL_SOCKET_IFNAME from the policy, default ^lo,docker,efa,veth) and keeps values "
             "you set."}) {}

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    const TemplateFacts& facts = ctx.facts;
    for (const Container& c : facts.containers) {
      if (!facts.IsEfaContainer(c) || c.has_env_from) continue;
      std::vector<std::pair<std::string, std::string>> wanted{{"FI_PROVIDER", "efa"}};
      if (facts.instance_type != nullptr && facts.instance_type->gpudirect_rdma) {
        wanted.emplace_back("FI_EFA_USE_DEVICE_RDMA", "1");
      }
      wanted.emplace_back("NCCL_SOCKET_IFNAME", ctx.policy.socket_ifname);
      std::string missing;
      for (const auto& [name, value] : wanted) {
        if (c.Env(name)) continue;
        missing += (missing.empty() ? "" : ", ") + name + "=" + value;
        report.plan().Append(c.at / "env", Json{{"name", name}, {"value", value}});
      }
      if (missing.empty()) continue;
      report.Add(c.at / "env", ContainerLabel(c) + " uses EFA but its env lacks " + missing +
                                   ". Set them in env (values you set are kept).");
    }
  }
};

NCCLGUARD_REGISTER(EfaEnvMissing);

}  // namespace
}  // namespace ncclguard::core::rules
