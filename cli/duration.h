#pragma once

#include <chrono>
#include <string>

namespace ncclguard::cli {

// A Go-style duration as kubectl and Kubernetes manifests write them: "90s", "5m", "1h30m",
// "500ms"; a bare number is seconds. Throws std::invalid_argument naming `flag` on anything else
// (empty, negative, unknown unit, overflow).
std::chrono::milliseconds ParseDuration(const std::string& text, const std::string& flag);

}  // namespace ncclguard::cli
