#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "controllers/job_kind.h"
#include "controllers/timestamps.h"
#include "core/json.h"

namespace ncclguard::controllers {

struct Condition {
  std::string type;
  std::string status;  // True | False | Unknown
  std::string reason;
  std::string message;
  std::optional<std::string> last_transition_time;  // as read; set by WithCondition
};

// The condition of `type` in the job's status.conditions, if present and readable.
std::optional<Condition> FindCondition(const Json& job, std::string_view type);

// The job's status.conditions with `wanted` set (its reason UpperCamelCase, core/reason.h: every
// kind gets the same reason, and metav1.Condition accepts nothing else), or nullopt when the list
// already says the same (type, status, reason and message). lastTransitionTime moves to `now` only
// when the status changes; other conditions (the kind's operator's) are kept as they are, in order.
std::optional<Json> WithCondition(const Json& job, const Condition& wanted,
                                  core::ConditionStyle style, Timestamp now);

}  // namespace ncclguard::controllers
