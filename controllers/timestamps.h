#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace ncclguard::controllers {

// Reconcilers never read a clock: the caller passes `now`.
using Timestamp = std::chrono::sys_seconds;

// "2026-12-02T14:00:00Z", the form of metav1.Time.
std::string FormatTime(Timestamp t);
// "2026-12-02T14:00:00.000000Z", the form of metav1.MicroTime (events.k8s.io eventTime).
std::string FormatMicroTime(Timestamp t);
// Reads RFC 3339 as the API server writes it (fractional seconds and offsets tolerated);
// nullopt for anything else.
std::optional<Timestamp> ParseTime(std::string_view text);

}  // namespace ncclguard::controllers
