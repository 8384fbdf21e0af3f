#include "core/engine.h"

#include <algorithm>

#include "core/guide.h"
#include "core/json_access.h"
#include "core/rule.h"
#include "core/trainjob.h"
#include "core/workload.h"

namespace ncclguard::core {

bool Evaluation::HasDeny() const {
  return std::any_of(findings.begin(), findings.end(),
                     [](const Finding& f) { return f.level == Level::Deny; });
}

namespace {

std::vector<TemplateFacts> ReadAllFacts(const Json& object, const Workload& workload,
                                        const Policy& policy) {
  std::vector<TemplateFacts> all;
  all.reserve(workload.templates.size());
  for (const PodTemplate& tmpl : workload.templates) {
    all.push_back(ReadTemplateFacts(object, tmpl, policy));
  }
  return all;
}

void Collect(const Rule& rule, Level level, const ObjectRef& ref, const Policy& policy,
             std::vector<Violation>& violations, std::vector<Finding>& out) {
  const std::string guide = GuideLink(policy.guide_base_url, rule.Info().slug);
  for (Violation& v : violations) {
    out.push_back(
        {std::string(rule.Info().id), level, guide, std::move(v.message), ref, std::move(v.path)});
  }
}

bool InScope(const Rule& rule, const EvaluateOptions& options) {
  return rule.Info().scope == RuleScope::Pod ? options.pod_rules : options.job_rules;
}

const std::vector<const Rule*>& FixRulesInOrder() {
  static const std::vector<const Rule*> ordered = [] {
    std::vector<const Rule*> rules;
    for (const Rule* rule : RuleRegistry::All()) {
      if (rule->Info().action == Level::Fix) rules.push_back(rule);
    }
    std::stable_sort(rules.begin(), rules.end(),
                     [](const Rule* a, const Rule* b) { return a->FixOrder() < b->FixOrder(); });
    return rules;
  }();
  return ordered;
}

}  // namespace

Evaluation Evaluate(Json object, const Policy& policy, const EvaluateOptions& options) {
  const std::optional<Workload> workload = ParseWorkload(object, options.runtimes);
  if (!workload) {
    Evaluation result;
    result.fixed = std::move(object);
    return result;
  }
  return Evaluate(std::move(object), *workload, policy, options);
}

namespace {

// The rules over `working`, the object the workload's templates point into; findings name `ref`.
Evaluation EvaluateIn(Json working, const Workload& parsed, const ObjectRef& ref,
                      const Policy& policy, const EvaluateOptions& options) {
  Evaluation result;
  const Workload* workload = &parsed;
  result.recognized = true;

  // Fix phase. Facts point into `working`; a template's are re-read after a fix changed it.
  std::vector<TemplateFacts> facts = ReadAllFacts(working, *workload, policy);
  for (const Rule* rule : FixRulesInOrder()) {
    const RuleInfo& info = rule->Info();
    if (!InScope(*rule, options) || !policy.RuleEnabled(info.id)) continue;
    if (!options.only_rule.empty() && info.id != options.only_rule) continue;
    if (policy.EffectiveLevel(info.id, info.action) != Level::Fix) continue;
    for (std::size_t t = 0; t < workload->templates.size(); ++t) {
      RuleReport report(working);
      rule->CheckTemplate(
          {working, *workload, facts[t], policy, options.image_pins, options.placement}, report);
      Collect(*rule, Level::Fix, ref, policy, report.violations(), result.findings);
      if (report.plan().empty()) continue;
      report.plan().ApplyTo(working, result.patch);
      // The patch touched only this template's subtree: nodes of the other templates stayed put.
      facts[t] = ReadTemplateFacts(working, workload->templates[t], policy, TemplateRead::AfterFix);
    }
  }

  // Check phase over the fixed object; fix rules the policy demoted report here without fixing.
  for (const Rule* rule : RuleRegistry::All()) {
    if (!options.check_rules) break;
    const RuleInfo& info = rule->Info();
    if (!InScope(*rule, options) || !policy.RuleEnabled(info.id)) continue;
    if (!options.only_rule.empty() && info.id != options.only_rule) continue;
    const Level level = policy.EffectiveLevel(info.id, info.action);
    if (level == Level::Fix) continue;
    RuleReport report(working);
    if (info.scope == RuleScope::Job) {
      rule->CheckJob({working, *workload, facts, policy}, report);
    } else {
      for (const TemplateFacts& template_facts : facts) {
        rule->CheckTemplate(
            {working, *workload, template_facts, policy, options.image_pins, options.placement},
            report);
      }
    }
    Collect(*rule, level, ref, policy, report.violations(), result.findings);
  }
  result.fixed = std::move(working);
  return result;
}

// Where a finding in the JobSet made of a TrainJob is, in the TrainJob: spec.trainer for the
// trainer's job "node", which spec.trainer configures, else the runtime it names.
std::string TrainJobPath(const Json& rendered, const std::string& path) {
  const std::string jobs = "/spec/replicatedJobs/";
  if (path.rfind(jobs, 0) != 0) return "/spec/runtimeRef";
  const std::size_t end = path.find('/', jobs.size());
  const std::string index = path.substr(jobs.size(), end - jobs.size());
  const JsonPointer name_at = JsonPointer("/spec/replicatedJobs") / index / "name";
  const bool trainer = index.find_first_not_of("0123456789") == std::string::npos &&
                       !index.empty() && rendered.contains(name_at) &&
                       rendered.at(name_at) == std::string(kTrainerNode);
  return trainer ? "/spec/trainer" : "/spec/runtimeRef";
}

// A TrainJob: the rules see the JobSet the Trainer makes of it; the fixes come back as
// ncclguard's runtime patch where Trainer allows one, the rest happens to the pods.
Evaluation EvaluateRendered(Json object, const Workload& workload, const Policy& policy,
                            const EvaluateOptions& options) {
  const ObjectRef ref = ObjectRef::From(object);
  Evaluation rendered = EvaluateIn(Json(*workload.rendered), workload, ref, policy, options);
  Evaluation result;
  result.recognized = true;
  result.findings = std::move(rendered.findings);
  for (Finding& finding : result.findings) {
    finding.path = TrainJobPath(*workload.rendered, finding.path);
  }
  if (!rendered.patch.empty() && !HasRuntimePatch(object)) {
    if (auto patch = RuntimePatchOf(*workload.rendered, rendered.fixed)) {
      Json op;
      if (OptionalArray(object, JsonPointer("/spec/runtimePatches")) != nullptr) {
        op = Json{{"op", "add"}, {"path", "/spec/runtimePatches/-"}, {"value", std::move(*patch)}};
      } else if (OptionalObject(object, JsonPointer("/spec")) != nullptr) {
        op = Json{{"op", "add"},
                  {"path", "/spec/runtimePatches"},
                  {"value", Json::array({std::move(*patch)})}};
      } else {
        op = Json{{"op", "add"},
                  {"path", "/spec"},
                  {"value", {{"runtimePatches", Json::array({std::move(*patch)})}}}};
      }
      object.patch_inplace(Json::array({op}));
      result.patch.push_back(std::move(op));
    }
  }
  result.fixed = std::move(object);
  return result;
}

}  // namespace

Evaluation Evaluate(Json object, const Workload& parsed, const Policy& policy,
                    const EvaluateOptions& options) {
  if (parsed.rendered) return EvaluateRendered(std::move(object), parsed, policy, options);
  const ObjectRef ref = ObjectRef::From(object);
  return EvaluateIn(std::move(object), parsed, ref, policy, options);
}

}  // namespace ncclguard::core
