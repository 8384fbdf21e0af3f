#include "core/json_access.h"
#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

class HostPathInfiniband final : public Rule {
 public:
  HostPathInfiniband()
      : Rule(
            {"hostpath-infiniband", "efa-tcp-fallback", Level::Deny, RuleScope::Pod,
             "The pod mounts /dev/infiniband from the host; the EFA device plugin already provides "
             "exactly the devices the pod was allocated, and the hostPath bypasses that "
             "accounting.",
             "Remove the hostPath volume and request vpc.amazonaws.com/efa instead."}) {}

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    const JsonPointer volumes_at = ctx.facts.pod_spec / "volumes";
    const Json* volumes = OptionalArray(ctx.object, volumes_at);
    if (volumes == nullptr) return;
    for (std::size_t i = 0; i < volumes->size(); ++i) {
      auto path = OptionalString(ctx.object, volumes_at / i / "hostPath" / "path");
      if (!path) continue;
      while (path->size() > 1 && path->back() == '/') path->pop_back();
      if (*path != "/dev/infiniband" && !path->starts_with("/dev/infiniband/")) continue;
      report.Add(volumes_at / i / "hostPath",
                 "volume mounts hostPath " + *path +
                     ": the EFA device plugin provides the devices a pod is allocated. Remove this "
                     "volume and request vpc.amazonaws.com/efa.");
    }
  }
};

NCCLGUARD_REGISTER(HostPathInfiniband);

}  // namespace
}  // namespace ncclguard::core::rules
