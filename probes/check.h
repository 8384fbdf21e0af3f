#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/catalog.h"

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

class CheckRegistry {
 public:
  // Also registers the check's description in core::Catalog (which rejects a duplicate id).
  static void Add(std::unique_ptr<Check> check);
  // In Info().order, then id.
  static std::vector<const Check*> All();
  static const Check* Find(std::string_view id);
};

template <typename T>
struct RegisterCheck {
  RegisterCheck() { CheckRegistry::Add(std::make_unique<T>()); }
};

// Registers a check at static initialisation, as NCCLGUARD_REGISTER_RULE does a rule; the
// object's name is the check's, so checks compiled together (a unity build) do not collide.
#define NCCLGUARD_REGISTER_CHECK(CheckClass) \
  const ::ncclguard::probes::RegisterCheck<CheckClass> kRegistered##CheckClass {}

// Shorthand for a result without a host fix.
CheckResult Result(CheckStatus status, std::string observed, std::string expected,
                   std::string message);

}  // namespace ncclguard::probes
