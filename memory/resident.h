// The process's resident memory, read from procfs.
#pragma once

#include <cstddef>
#include <optional>

namespace ncclguard::memory {

// The process's resident set size (/proc/self/statm), in bytes; nullopt where it cannot be read.
std::optional<std::size_t> ResidentBytes();

}  // namespace ncclguard::memory
