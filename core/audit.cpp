#include "core/audit.h"

#include <algorithm>

#include "core/contract.h"
#include "core/engine.h"
#include "core/gate.h"
#include "core/guide.h"
#include "core/json_access.h"
#include "core/placement.h"
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

// The job's own NcclPlacement condition (written by the controller once its pods are bound) when
// it says the pods are spread across network blocks: a warning result of rule topology-placement,
// with the condition's message. nullopt for any other placement, or none.
std::optional<AuditFinding> SpreadPlacement(const Json& object, const Policy& policy) {
  const Json* status = Member(object, "status");
  const Json* conditions = status == nullptr ? nullptr : Member(*status, "conditions");
  if (conditions == nullptr || !conditions->is_array()) return std::nullopt;
  for (const Json& condition : *conditions) {
    const auto text = [&](std::string_view key) {
      const Json* value = Member(condition, key);
      return value != nullptr && value->is_string() ? value->get<std::string>() : std::string();
    };
    if (text("type") != kPlacementCondition || text("reason") != kPlacementSpread) continue;
    AuditFinding spread;
    spread.finding.rule = "topology-placement";
    spread.finding.level = Level::Warn;
    spread.finding.guide = GuideLink(policy.guide_base_url, "advanced-tuning");
    spread.finding.message =
        "its pods are spread across network blocks (condition NcclPlacement): " + text("message");
    spread.finding.path = "/status/conditions";
    spread.finding.object = ObjectRef::From(object);
    spread.result = AuditResult::Warn;
    spread.severity = SeverityOf(Level::Warn);
    return spread;
  }
  return std::nullopt;
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
  if (!pod) {
    if (std::optional<AuditFinding> spread = SpreadPlacement(object, policy)) {
      audit.findings.push_back(std::move(*spread));
    }
  }
  return audit;
}

}  // namespace ncclguard::core
