#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"

namespace ncclguard::controllers::diagnoses {

using core::Json;

// "pod P container C", the subject of a diagnosis line.
std::string Subject(const Json& pod, const Json& container_status);

// Calls fn(pod, container status, terminated) for every termination a pod reports: the current
// state and the last one (a restarted container keeps the failure in lastState), init containers
// included.
void ForEachTermination(
    const std::vector<Json>& pods,
    const std::function<void(const Json& pod, const Json& status, const Json& terminated)>& fn);

// Calls fn(pod, container status, waiting) for every container waiting with a reason.
void ForEachWaiting(
    const std::vector<Json>& pods,
    const std::function<void(const Json& pod, const Json& status, const Json& waiting)>& fn);

// Scheduling failures: the message of each pod's PodScheduled=False condition, and of each
// FailedScheduling Event, that contains `needle`. Returns "pod P: <message>" lines.
std::vector<std::string> SchedulingFailures(const std::vector<Json>& pods,
                                            const std::vector<Json>& events,
                                            std::string_view needle);

bool Contains(std::string_view text, std::string_view needle);
// Case-insensitive.
bool ContainsNoCase(std::string_view text, std::string_view needle);

// Each distinct line once, in first-seen order; at most `limit` lines, the rest counted.
std::vector<std::string> Distinct(std::vector<std::string> lines, std::size_t limit = 3);

}  // namespace ncclguard::controllers::diagnoses
