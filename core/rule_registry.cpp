#include <algorithm>

#include "core/catalog.h"
#include "core/rule.h"

namespace ncclguard::core {
namespace {

struct Registry {
  std::vector<std::unique_ptr<Rule>> owned;
  std::vector<const Rule*> sorted;
};

Registry& TheRegistry() {
  static Registry registry;
  return registry;
}

FindingLevel DescribedLevel(Level action) {
  switch (action) {
    case Level::Fix:
      return FindingLevel::Fix;
    case Level::Deny:
      return FindingLevel::Deny;
    case Level::Warn:
      return FindingLevel::Warn;
  }
  return FindingLevel::Warn;
}

}  // namespace

// The description goes to the catalog, which rejects a duplicate id or an unknown slug.
RuleRegistry::Registrar::Registrar(std::unique_ptr<Rule> rule) {
  Registry& registry = TheRegistry();
  const RuleInfo& info = rule->Info();
  Catalog::Register({info.id, FindingKind::Rule, DescribedLevel(info.action), info.slug,
                     info.summary, info.remedy});
  const Rule* raw = rule.get();
  registry.owned.push_back(std::move(rule));
  auto pos =
      std::lower_bound(registry.sorted.begin(), registry.sorted.end(), raw,
                       [](const Rule* a, const Rule* b) { return a->Info().id < b->Info().id; });
  registry.sorted.insert(pos, raw);
}

std::span<const Rule* const> RuleRegistry::All() { return TheRegistry().sorted; }

const Rule* RuleRegistry::Find(std::string_view id) {
  for (const Rule* rule : TheRegistry().sorted) {
    if (rule->Info().id == id) return rule;
  }
  return nullptr;
}

}  // namespace ncclguard::core
