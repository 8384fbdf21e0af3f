#include <algorithm>
#include <stdexcept>

#include "core/catalog.h"
#include "probes/check.h"

namespace ncclguard::probes {
namespace {

std::vector<std::unique_ptr<Check>>& Checks() {
  static std::vector<std::unique_ptr<Check>> checks;
  return checks;
}

std::size_t CatalogPosition(std::string_view id) {
  const auto entries = core::NodeChecks();
  const auto it = std::find_if(entries.begin(), entries.end(),
                               [&](const core::CatalogEntry& entry) { return entry.id == id; });
  return static_cast<std::size_t>(it - entries.begin());
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
  // A check outside docs/rules.md's list would publish an id nobody documented.
  if (CatalogPosition(check->Id()) == core::NodeChecks().size())
    throw std::logic_error("node check '" + std::string(check->Id()) + "' is not in the catalog");
  Checks().push_back(std::move(check));
}

std::vector<const Check*> CheckRegistry::All() {
  std::vector<const Check*> all;
  for (const auto& check : Checks()) all.push_back(check.get());
  std::sort(all.begin(), all.end(), [](const Check* a, const Check* b) {
    return CatalogPosition(a->Id()) < CatalogPosition(b->Id());
  });
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
