#include "controllers/diagnoses/pod_status.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "controllers/json_fields.h"

namespace ncclguard::controllers::diagnoses {
namespace {

std::string Name(const Json& object) {
  const auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return "";
  return StringField(*metadata, "name");
}

const Json* Field(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

void ForEachStatus(const std::vector<Json>& pods,
                   const std::function<void(const Json&, const Json&)>& fn) {
  for (const Json& pod : pods) {
    const Json* status = Field(pod, "status");
    if (status == nullptr) continue;
    for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
      const Json* statuses = Field(*status, list);
      if (statuses == nullptr || !statuses->is_array()) continue;
      for (const Json& s : *statuses) {
        if (s.is_object()) fn(pod, s);
      }
    }
  }
}

}  // namespace

std::string Subject(const Json& pod, const Json& container_status) {
  return "pod " + Name(pod) + " container " + StringField(container_status, "name");
}

void ForEachTermination(
    const std::vector<Json>& pods,
    const std::function<void(const Json& pod, const Json& status, const Json& terminated)>& fn) {
  ForEachStatus(pods, [&](const Json& pod, const Json& s) {
    for (const char* which : {"state", "lastState"}) {
      const Json* state = Field(s, which);
      const Json* terminated = state != nullptr ? Field(*state, "terminated") : nullptr;
      if (terminated != nullptr && terminated->is_object()) fn(pod, s, *terminated);
    }
  });
}

void ForEachWaiting(
    const std::vector<Json>& pods,
    const std::function<void(const Json& pod, const Json& status, const Json& waiting)>& fn) {
  ForEachStatus(pods, [&](const Json& pod, const Json& s) {
    const Json* state = Field(s, "state");
    const Json* waiting = state != nullptr ? Field(*state, "waiting") : nullptr;
    if (waiting != nullptr && waiting->is_object() && !StringField(*waiting, "reason").empty()) {
      fn(pod, s, *waiting);
    }
  });
}

std::vector<std::string> SchedulingFailures(const std::vector<Json>& pods,
                                            const std::vector<Json>& events,
                                            std::string_view needle) {
  std::vector<std::string> lines;
  for (const Json& pod : pods) {
    const Json* status = Field(pod, "status");
    const Json* conditions = status != nullptr ? Field(*status, "conditions") : nullptr;
    if (conditions == nullptr || !conditions->is_array()) continue;
    for (const Json& c : *conditions) {
      if (StringField(c, "type") != "PodScheduled" || StringField(c, "status") != "False") continue;
      const std::string message = StringField(c, "message");
      if (Contains(message, needle)) lines.push_back("pod " + Name(pod) + ": " + message);
    }
  }
  for (const Json& event : events) {
    if (StringField(event, "reason") != "FailedScheduling") continue;
    // core/v1 Events say `message` and `involvedObject`; events.k8s.io/v1 say `note`, `regarding`.
    std::string message = StringField(event, "note");
    if (message.empty()) message = StringField(event, "message");
    if (!Contains(message, needle)) continue;
    const Json* about = Field(event, "regarding");
    if (about == nullptr) about = Field(event, "involvedObject");
    const std::string kind = about != nullptr ? StringField(*about, "kind") : "";
    const std::string name = about != nullptr ? StringField(*about, "name") : "";
    std::string subject = kind == "Pod" ? "pod " + name : (kind.empty() ? "" : kind + " " + name);
    lines.push_back((subject.empty() ? std::string() : subject + ": ") + message);
  }
  return Distinct(std::move(lines));
}

bool Contains(std::string_view text, std::string_view needle) {
  return text.find(needle) != std::string_view::npos;
}

bool ContainsNoCase(std::string_view text, std::string_view needle) {
  return std::search(text.begin(), text.end(), needle.begin(), needle.end(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) ==
                  std::tolower(static_cast<unsigned char>(b));
         }) != text.end();
}

std::vector<std::string> Distinct(std::vector<std::string> lines, std::size_t limit) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  std::size_t dropped = 0;
  for (std::string& line : lines) {
    if (!seen.insert(line).second) continue;
    if (out.size() < limit) {
      out.push_back(std::move(line));
    } else {
      ++dropped;
    }
  }
  if (dropped > 0) out.push_back("and " + std::to_string(dropped) + " more");
  return out;
}

}  // namespace ncclguard::controllers::diagnoses
