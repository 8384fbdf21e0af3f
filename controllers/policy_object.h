#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "controllers/timestamps.h"
#include "core/json.h"
#include "core/policy.h"

namespace ncclguard::controllers {

// The controller reads one NcclPolicy: cluster-scoped, named "default" (crds/ncclpolicy.yaml).
inline constexpr std::string_view kPolicyObjectName = "default";

// The policy an NcclPolicy object describes, on top of the built-in defaults. Throws
// core::PolicyError naming the object and the field ("NcclPolicy default: spec.gate.enabled:
// expected true or false").
core::Policy PolicyFromObject(const core::Json& object);

// The policy in force: follows the NcclPolicy object as it changes, keeps the last good policy
// when an update is unusable, and falls back to the defaults when the object is deleted.
// The status merge patch that tells the NcclPolicy's author whether the controller uses it:
// condition Accepted=True (reason Valid) or Accepted=False (reason Invalid, message = the error),
// and observedGeneration. nullopt when the status already says so.
std::optional<core::Json> PolicyStatusPatch(const core::Json& object,
                                            const std::optional<std::string>& error, Timestamp now);

class PolicyHolder {
 public:
  const core::Policy& Current() const { return current_; }
  // The object's new state (nullopt = deleted). Returns the error that kept the previous policy,
  // or nullopt when the update took effect.
  std::optional<std::string> Update(const std::optional<core::Json>& object);

 private:
  core::Policy current_ = core::Policy::Defaults();
};

}  // namespace ncclguard::controllers
