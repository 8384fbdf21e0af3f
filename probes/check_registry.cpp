#include <algorithm>
#include <tuple>

#include "probes/check.h"

namespace ncclguard::probes {
namespace {

std::vector<std::unique_ptr<Check>>& Checks() {
  static std::vector<std::unique_ptr<Check>> checks;
  return checks;
}

bool Before(const Check* a, const Check* b) {
  return std::tuple(a->Info().order, a->Id()) < std::tuple(b->Info().order, b->Id());
}

}  // namespace

std::string_view StatusName(CheckStatus status) {
  switch (status) {
    case CheckStatus::Pass:
      return "Pass";
    case CheckStatus::Warn:
      return "Warn";
    case CheckStatus::Fail:
      return "Fail";
    case CheckStatus::Skip:
      return "Skip";
  }
  return "Skip";
}

void CheckRegistry::Add(std::unique_ptr<Check> check) {
  const CheckInfo& info = check->Info();
  core::Catalog::Register({info.id, core::FindingKind::Check, info.level, info.slug, info.summary,
                           info.remedy, info.order});
  Checks().push_back(std::move(check));
}

std::vector<const Check*> CheckRegistry::All() {
  std::vector<const Check*> all;
  for (const auto& check : Checks()) all.push_back(check.get());
  std::sort(all.begin(), all.end(), Before);
  return all;
}

const Check* CheckRegistry::Find(std::string_view id) {
  for (const auto& check : Checks())
    if (check->Id() == id) return check.get();
  return nullptr;
}

CheckResult Result(CheckStatus status, std::string observed, std::string expected,
                   std::string message) {
  CheckResult result;
  result.status = status;
  result.observed = std::move(observed);
  result.expected = std::move(expected);
  result.message = std::move(message);
  return result;
}

}  // namespace ncclguard::probes
