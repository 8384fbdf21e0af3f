#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/catalog.h"
#include "core/registry.h"

namespace ncclguard::probes {

class ProbeContext;

enum class CheckStatus { Pass, Warn, Fail, Skip };

std::string_view StatusName(CheckStatus status);

// One node check's answer (docs/contract.md: the NodeValidation status.checks[] entry).
struct CheckResult {
  std::string id;
  CheckStatus status = CheckStatus::Skip;
  std::string observed;
  std::string expected;
  std::string message;
  std::string guide;  // full link: <guideBaseURL>#<slug>
  // Host-level fix from docs/guide.md, for a Warn or Fail the admin can act on. The probe never
  // runs it.
  std::string suggested_command;
  std::string blast_radius;
  // How long the check ran, measured by the runner (for one past its timeout, until then). For
  // the probe's metrics; not part of the NodeValidation.
  std::chrono::nanoseconds duration{0};
};

// What a node check is, for `ncclguard explain` and docs/rules.md: its entry in core::Catalog.
struct CheckInfo {
  std::string_view id;
  std::string_view slug;     // guide section
  core::FindingLevel level;  // the worst status it reports: Fail, Warn, or Info (Pass/Skip only)
  int order;                 // the probe runs and reports checks in this order
  std::string_view summary;  // what it reads and compares, one sentence
  std::string_view remedy;   // what the admin does on a Warn or Fail
};

// A node check: reads the host (under the context's host root) and the vendor libraries through
// the context, never changes anything. One file in probes/checks/, registered by id.
class Check {
 public:
  using RegistryEntry = Check;  // NCCLGUARD_REGISTER(MyCheck) adds it to CheckRegistry
  explicit Check(CheckInfo info) : info_(info) {}
  virtual ~Check() = default;
  const CheckInfo& Info() const { return info_; }
  std::string_view Id() const { return info_.id; }
  // Fills status, observed, expected, message (and a host fix); id and guide are set by the
  // runner from Info().
  virtual CheckResult Run(ProbeContext& context) const = 0;

 private:
  CheckInfo info_;
};

// Shorthand for a result without a host fix.
CheckResult Result(CheckStatus status, std::string observed, std::string expected,
                   std::string message);

using CheckRegistry = core::Registry<Check>;

}  // namespace ncclguard::probes

// Checks are listed and run in (order, id); each also registers its description in core::Catalog
// (which rejects an unknown guide slug).
namespace ncclguard::core {
template <>
struct RegistryTraits<probes::Check> {
  static constexpr std::string_view kKind = "node check";
  static std::string_view Id(const probes::Check& check) { return check.Id(); }
  static int Order(const probes::Check& check) { return check.Info().order; }
  static void OnRegister(const probes::Check& check);
};
}  // namespace ncclguard::core
