#include "core/engine.h"

#include <algorithm>

#include "core/guide.h"
#include "core/rule.h"
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
  const std::optional<Workload> workload = ParseWorkload(object);
  if (!workload) {
    Evaluation result;
    result.fixed = std::move(object);
    return result;
  }
  return Evaluate(std::move(object), *workload, policy, options);
}

Evaluation Evaluate(Json object, const Workload& parsed, const Policy& policy,
                    const EvaluateOptions& options) {
  Evaluation result;
  const Workload* workload = &parsed;
  result.recognized = true;
  const ObjectRef ref = ObjectRef::From(object);
  Json working = std::move(object);

  // Fix phase. Facts point into `working`; a template's are re-read after a fix changed it.
  std::vector<TemplateFacts> facts = ReadAllFacts(working, *workload, policy);
  for (const Rule* rule : FixRulesInOrder()) {
    const RuleInfo& info = rule->Info();
    if (!InScope(*rule, options) || !policy.RuleEnabled(info.id)) continue;
    if (policy.EffectiveLevel(info.id, info.action) != Level::Fix) continue;
    for (std::size_t t = 0; t < workload->templates.size(); ++t) {
      RuleReport report(working);
      rule->CheckTemplate({working, *workload, facts[t], policy}, report);
      Collect(*rule, Level::Fix, ref, policy, report.violations(), result.findings);
      if (report.plan().empty()) continue;
      const Json ops(report.plan().ops());
      working.patch_inplace(ops);
      for (const Json& op : ops) result.patch.push_back(op);
      // The patch touched only this template's subtree: nodes of the other templates stayed put.
      facts[t] = ReadTemplateFacts(working, workload->templates[t], policy);
    }
  }

  // Check phase over the fixed object; fix rules the policy demoted report here without fixing.
  for (const Rule* rule : RuleRegistry::All()) {
    if (!options.check_rules) break;
    const RuleInfo& info = rule->Info();
    if (!InScope(*rule, options) || !policy.RuleEnabled(info.id)) continue;
    const Level level = policy.EffectiveLevel(info.id, info.action);
    if (level == Level::Fix) continue;
    RuleReport report(working);
    if (info.scope == RuleScope::Job) {
      rule->CheckJob({working, *workload, facts, policy}, report);
    } else {
      for (const TemplateFacts& template_facts : facts) {
        rule->CheckTemplate({working, *workload, template_facts, policy}, report);
      }
    }
    Collect(*rule, level, ref, policy, report.violations(), result.findings);
  }
  result.fixed = std::move(working);
  return result;
}

}  // namespace ncclguard::core
