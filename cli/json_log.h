#pragma once

#include <string_view>

namespace ncclguard::cli {

// Routes spdlog to stderr as one JSON object per line: {"ts","level", ...}. A message that is
// itself a JSON object contributes its fields (structured logs); any other message becomes
// "msg". Throws std::invalid_argument for an unknown level name.
void ConfigureJsonLogging(std::string_view level);

}  // namespace ncclguard::cli
