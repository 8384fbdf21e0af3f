#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/finding.h"
#include "core/image_pin.h"
#include "core/json.h"
#include "core/patch.h"
#include "core/placement_request.h"
#include "core/pod_spec.h"
#include "core/policy.h"
#include "core/registry.h"
#include "core/workload.h"

namespace ncclguard::core {

enum class RuleScope { Pod, Job };

struct RuleInfo {
  std::string_view id;
  std::string_view slug;  // guide section (docs/rules.md)
  Level action;           // fix, deny or warn
  RuleScope scope;
  std::string_view summary;  // the condition, one sentence
  std::string_view remedy;   // what the user (or the fix) does about it
};

// What a rule sees for one pod template.
struct TemplateContext {
  const Json& object;
  const Workload& workload;
  const TemplateFacts& facts;
  const Policy& policy;
  // The digests recorded for the pod's job (the in-process webhook admitting a Pod), else null.
  const JobImagePins* image_pins = nullptr;
  // Where the job's pods are asked to go (the in-process webhook), else null.
  const PlacementRequest* placement = nullptr;
};

// What a job-level rule sees: every template of the workload.
struct JobContext {
  const Json& object;
  const Workload& workload;
  const std::vector<TemplateFacts>& templates;
  const Policy& policy;
};

struct Violation {
  std::string path;  // JSON Pointer
  std::string message;
};

// A rule's output: violations, and for fix rules the patch that fixes them.
class RuleReport {
 public:
  explicit RuleReport(const Json& object) : plan_(object) {}
  void Add(const JsonPointer& at, std::string message) {
    violations_.push_back({at.to_string(), std::move(message)});
  }
  PatchPlan& plan() { return plan_; }
  std::vector<Violation>& violations() { return violations_; }

 private:
  PatchPlan plan_;
  std::vector<Violation> violations_;
};

class Rule {
 public:
  using RegistryEntry = Rule;  // NCCLGUARD_REGISTER(MyRule) adds it to RuleRegistry
  explicit Rule(RuleInfo info) : info_(info) {}
  virtual ~Rule() = default;
  const RuleInfo& Info() const { return info_; }

  // Pod-scope rules: called once per pod template. Fix rules also fill report.plan().
  virtual void CheckTemplate(const TemplateContext&, RuleReport&) const {}
  // Job-scope rules: called once per workload.
  virtual void CheckJob(const JobContext&, RuleReport&) const {}
  // Fix rules run in (FixOrder, id) order; a rule whose fix others build on runs earlier.
  virtual int FixOrder() const { return 0; }

 private:
  RuleInfo info_;
};

// Every rule registers itself from its own file (core/rules/) with NCCLGUARD_REGISTER, so adding
// a rule is one file. Sorted by id, so evaluation order and output are deterministic; the
// description goes to core::Catalog, which rejects an unknown guide slug.
template <>
struct RegistryTraits<Rule> {
  static constexpr std::string_view kKind = "rule";
  static std::string_view Id(const Rule& rule) { return rule.Info().id; }
  static void OnRegister(const Rule& rule);
};

using RuleRegistry = Registry<Rule>;

}  // namespace ncclguard::core
