#include "probes/check.h"

namespace ncclguard::probes {

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

namespace ncclguard::core {

void RegistryTraits<probes::Check>::OnRegister(const probes::Check& check) {
  const probes::CheckInfo& info = check.Info();
  Catalog::Register(
      {info.id, FindingKind::Check, info.level, info.slug, info.summary, info.remedy, info.order});
}

}  // namespace ncclguard::core
