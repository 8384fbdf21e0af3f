#include "core/audit.h"

#include <algorithm>

#include "core/engine.h"
#include "core/gate.h"
#include "core/pod_spec.h"
#include "core/workload.h"

namespace ncclguard::core {
namespace {

bool HasGpuTemplate(const Json& object, const Workload& workload, const Policy& policy) {
  const Json& subject = workload.Subject(object);
  return std::any_of(workload.templates.begin(), workload.templates.end(),
                     [&](const PodTemplate& tmpl) {
                       return ReadTemplateFacts(subject, tmpl, policy).HasGpuContainer();
                     });
}

std::string_view SeverityOf(Level level) {
  switch (level) {
    case Level::Deny:
      return "high";
    case Level::Fix:
      return "medium";
    case Level::Warn:
      return "low";
  }
  return "low";
}

}  // namespace

std::string_view AuditResultName(AuditResult result) {
  switch (result) {
    case AuditResult::Pass:
      return "pass";
    case AuditResult::Warn:
      return "warn";
    case AuditResult::Fail:
      return "fail";
  }
  return "fail";
}

AuditResult ObjectAudit::Result() const {
  AuditResult worst = AuditResult::Pass;
  for (const AuditFinding& finding : findings) worst = std::max(worst, finding.result);
  return worst;
}

AuditResult ResultOf(const Finding& finding, bool pod) {
  switch (finding.level) {
    case Level::Deny:
      return AuditResult::Fail;
    case Level::Fix:
      return pod ? AuditResult::Fail : AuditResult::Warn;
    case Level::Warn:
      return AuditResult::Warn;
  }
  return AuditResult::Warn;
}

std::optional<ObjectAudit> AuditObject(const Json& object, const Policy& policy,
                                       const RuntimeLookup& runtimes) {
  std::optional<Workload> workload = ParseWorkload(object, runtimes);
  if (!workload) return std::nullopt;
  const bool pod = workload->kind == WorkloadKind::Pod;
  if (!pod && !KindInfoOf(workload->kind).job) return std::nullopt;  // a runtime, a template
  if (!pod && ControlledByManagedJob(object)) return std::nullopt;
  if (!HasGpuTemplate(object, *workload, policy)) return std::nullopt;

  ObjectAudit audit;
  audit.object = ObjectRef::From(object);
  Evaluation evaluation =
      Evaluate(object, *workload, policy,
               {.pod_rules = true, .job_rules = !pod, .check_rules = true, .runtimes = runtimes});
  for (Finding& finding : evaluation.findings) {
    AuditFinding audited;
    audited.result = ResultOf(finding, pod);
    audited.severity = SeverityOf(finding.level);
    audited.finding = std::move(finding);
    audit.findings.push_back(std::move(audited));
  }
  return audit;
}

}  // namespace ncclguard::core
