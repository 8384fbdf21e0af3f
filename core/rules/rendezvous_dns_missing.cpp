#include "core/json_access.h"
#include "core/rendezvous.h"
#include "core/rules/rule_util.h"

namespace ncclguard::core::rules {
namespace {

// Kubeflow's training operator names a replica's pod <job>-<role>-<index> but gives it neither
// a subdomain nor a hostname, so <pod>.<service>.<ns>.svc (the MASTER_ADDR ncclguard's headless
// Service publishes) does not resolve. The mpi-operator and JobSet set both themselves. Which
// kinds' pods get them is KindInfo::ncclguard_sets_pod_subdomain.
class RendezvousDnsMissing final : public Rule {
 public:
  RendezvousDnsMissing()
      : Rule({"rendezvous-dns-missing", "dns-rendezvous", Level::Fix, RuleScope::Pod,
              "A pod of a Kubeflow training job has no subdomain, so its name under the job's "
              "headless rendezvous Service does not resolve and ranks cannot find rank 0 by a "
              "fully qualified MASTER_ADDR.",
              "Set spec.subdomain to the job's rendezvous Service (the job's name) and "
              "spec.hostname to the pod's name; the mutating webhook adds both."}) {}

  void CheckTemplate(const TemplateContext& ctx, RuleReport& report) const override {
    if (ctx.workload.kind != WorkloadKind::Pod) return;  // the operator names pods, not templates
    const KindInfo* info = nullptr;
    std::optional<std::string> job;
    for (const KindInfo& kind : ManagedKinds()) {
      if (!kind.ncclguard_sets_pod_subdomain) continue;
      job = OptionalString(ctx.object,
                           JsonPointer("/metadata/labels") / std::string(kind.pod_job_label));
      if (job && !job->empty()) {
        info = &kind;
        break;
      }
    }
    if (info == nullptr) return;
    const JsonPointer spec = ctx.facts.pod_spec;
    if (OptionalString(ctx.object, spec / "subdomain")) return;
    const std::string service = RendezvousServiceName(Json{{"apiVersion", info->api_version},
                                                           {"kind", info->kind_name},
                                                           {"metadata", {{"name", *job}}}});
    if (service.empty()) return;
    const auto pod = OptionalString(ctx.object, JsonPointer("/metadata/name"));
    report.Add(spec / "subdomain", "pod of training job \"" + *job + "\" has no subdomain, so " +
                                       pod.value_or("the pod") + "." + service +
                                       ".<namespace>.svc does not resolve. Set spec.subdomain: " +
                                       service + " and spec.hostname to the pod's name.");
    report.plan().Add(spec / "subdomain", service);
    if (pod && IsDns1035Label(*pod) && !OptionalString(ctx.object, spec / "hostname")) {
      report.plan().Add(spec / "hostname", *pod);
    }
  }
};

NCCLGUARD_REGISTER(RendezvousDnsMissing);

}  // namespace
}  // namespace ncclguard::core::rules
