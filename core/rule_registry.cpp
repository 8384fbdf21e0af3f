#include <algorithm>
#include <stdexcept>

#include "core/guide.h"
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

}  // namespace

RuleRegistry::Registrar::Registrar(std::unique_ptr<Rule> rule) {
  Registry& registry = TheRegistry();
  const RuleInfo& info = rule->Info();
  if (!IsGuideSlug(info.slug)) {
    throw std::logic_error("rule " + std::string(info.id) + " links unknown guide slug " +
                           std::string(info.slug));
  }
  if (Find(info.id) != nullptr)
    throw std::logic_error("rule registered twice: " + std::string(info.id));
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
