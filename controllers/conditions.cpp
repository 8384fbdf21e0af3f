#include "controllers/conditions.h"

#include "controllers/json_fields.h"
#include "core/reason.h"

namespace ncclguard::controllers {
namespace {

const Json* ConditionList(const Json& job) {
  const auto status = job.find("status");
  if (status == job.end() || !status->is_object()) return nullptr;
  const auto list = status->find("conditions");
  if (list == status->end() || !list->is_array()) return nullptr;
  return &*list;
}

// Only the message is bounded by every schema we write to (metav1.Condition: 32768).
std::string Bounded(std::string message) { return TruncateUtf8(std::move(message), 4096); }

}  // namespace

std::optional<Condition> FindCondition(const Json& job, std::string_view type) {
  const Json* list = ConditionList(job);
  if (list == nullptr) return std::nullopt;
  for (const Json& entry : *list) {
    if (!entry.is_object() || StringField(entry, "type") != type) continue;
    Condition c{std::string(type), StringField(entry, "status"), StringField(entry, "reason"),
                StringField(entry, "message"), std::nullopt};
    const std::string transition = StringField(entry, "lastTransitionTime");
    if (!transition.empty()) c.last_transition_time = transition;
    return c;
  }
  return std::nullopt;
}

std::optional<Json> WithCondition(const Json& job, const Condition& wanted,
                                  core::ConditionStyle style, Timestamp now) {
  // The callers' reasons are UpperCamelCase already; one that is not would fail the whole status
  // write on a metav1.Condition schema.
  const std::string reason =
      core::IsValidReason(wanted.reason) ? wanted.reason : core::ReasonFromId(wanted.reason);
  const std::string message = Bounded(wanted.message);
  const Json* existing_list = ConditionList(job);
  Json list = existing_list != nullptr ? *existing_list : Json::array();

  Json* slot = nullptr;
  for (Json& entry : list) {
    if (entry.is_object() && StringField(entry, "type") == wanted.type) {
      slot = &entry;
      break;
    }
  }
  if (slot != nullptr && StringField(*slot, "status") == wanted.status &&
      StringField(*slot, "reason") == reason && StringField(*slot, "message") == message) {
    return std::nullopt;
  }

  const std::string now_text = FormatTime(now);
  std::string transition = now_text;
  if (slot != nullptr && StringField(*slot, "status") == wanted.status) {
    const std::string previous = StringField(*slot, "lastTransitionTime");
    if (!previous.empty()) transition = previous;
  }
  Json entry{{"type", wanted.type}, {"status", wanted.status}};
  switch (style) {
    case core::ConditionStyle::Kubeflow:
      entry["lastUpdateTime"] = now_text;
      break;
    case core::ConditionStyle::Batch:
      entry["lastProbeTime"] = now_text;
      break;
    case core::ConditionStyle::Meta:
    case core::ConditionStyle::None:
      break;
  }
  entry["lastTransitionTime"] = transition;
  entry["reason"] = reason;
  entry["message"] = message;
  if (slot != nullptr) {
    *slot = std::move(entry);
  } else {
    list.push_back(std::move(entry));
  }
  return list;
}

}  // namespace ncclguard::controllers
