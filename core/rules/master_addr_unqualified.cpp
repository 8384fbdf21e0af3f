#include <arpa/inet.h>

#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

bool IsIpAddress(const std::string& text) {
  unsigned char buffer[16];
  return inet_pton(AF_INET, text.c_str(), buffer) == 1 ||
         inet_pton(AF_INET6, text.c_str(), buffer) == 1;
}

class MasterAddrUnqualified final : public Rule {
 public:
  MasterAddrUnqualified()
      : Rule({"master-addr-unqualified", "dns-rendezvous", Level::Warn, RuleScope::Pod,
              "MASTER_ADDR is a bare name rather than an IP or a cluster DNS name "
              "(<pod>.<service>.<namespace>.svc.cluster.local): it resolves only through search "
              "domains, and fails or resolves late when the rank-0 pod starts after the others.",
              "Use the fully qualified name of the rank-0 pod behind the job's headless Service "
              "(ncclguard's controller creates the Service)."}) {}

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    const std::string suffix = ".svc." + ctx.policy.cluster_domain;
    const bool single_pod = RankPods(ctx.workload) <= 1;
    ForEachLiteralEnv(
        ctx.facts, "MASTER_ADDR",
        [&](const Container& c, const std::string& value, const JsonPointer& path) {
          std::string name = value;
          if (name.empty() || name.find("$(") != std::string::npos || IsIpAddress(name)) return;
          if (!name.empty() && name.back() == '.') name.pop_back();
          if (name.ends_with(suffix) && name.size() > suffix.size()) return;
          if (name == "localhost" && single_pod) return;
          report.Add(path, ContainerLabel(c) + ": MASTER_ADDR=\"" + value +
                               "\" is not fully qualified. Use <pod>.<service>.<namespace>" +
                               suffix + " (the job's headless Service) or an IP.");
        });
  }
};

NCCLGUARD_REGISTER(MasterAddrUnqualified);

}  // namespace
}  // namespace ncclguard::core::rules
