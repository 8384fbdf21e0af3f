#include "core/catalog.h"
#include "core/rule.h"

namespace ncclguard::core {
namespace {

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

void RegistryTraits<Rule>::OnRegister(const Rule& rule) {
  const RuleInfo& info = rule.Info();
  Catalog::Register({info.id, FindingKind::Rule, DescribedLevel(info.action), info.slug,
                     info.summary, info.remedy});
}

}  // namespace ncclguard::core
