#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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

// A node check: reads the host (under the context's host root) and the vendor libraries through
// the context, never changes anything. Implementations register themselves by id.
class Check {
 public:
  virtual ~Check() = default;
  virtual std::string_view Id() const = 0;
  // Fills status, observed, expected, message (and a host fix); id and guide are set by the
  // runner from the catalog.
  virtual CheckResult Run(ProbeContext& context) const = 0;
};

class CheckRegistry {
 public:
  static void Add(std::unique_ptr<Check> check);
  // In docs/rules.md's node-check order (core::NodeChecks()).
  static std::vector<const Check*> All();
  static const Check* Find(std::string_view id);
};

template <typename T>
struct RegisterCheck {
  RegisterCheck() { CheckRegistry::Add(std::make_unique<T>()); }
};

// Shorthand for a result without a host fix.
CheckResult Result(CheckStatus status, std::string observed, std::string expected,
                   std::string message);

}  // namespace ncclguard::probes
