#include "memory/headroom.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace ncclguard::memory {

std::size_t LimitReserve(std::size_t memory_limit) {
  return std::max(memory_limit / 8, std::size_t{32} << 20);
}

std::size_t InFlightCapacity(std::size_t memory_limit, std::size_t resident, std::size_t in_flight,
                             std::size_t configured) {
  const std::size_t floor = std::min(kInFlightFloor, configured);
  // The rest of the process: what is resident beyond the reviews' own (a review's blocks may
  // not all be resident yet, so this can read low by what they have not touched).
  const std::size_t others = resident > in_flight ? resident - in_flight : 0;
  const std::size_t taken = others + LimitReserve(memory_limit);
  if (taken >= memory_limit) return floor;
  return std::clamp(memory_limit - taken, floor, configured);
}

std::optional<std::size_t> ResidentBytes() {
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char text[128];
  const ssize_t length = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (length <= 0) return std::nullopt;
  text[length] = '\0';
  // "size resident shared text lib data dt", in pages.
  char* end = nullptr;
  std::strtoull(text, &end, 10);
  if (end == text || *end != ' ') return std::nullopt;
  const char* resident_text = end + 1;
  const unsigned long long pages = std::strtoull(resident_text, &end, 10);
  if (end == resident_text) return std::nullopt;
  const long page = ::sysconf(_SC_PAGESIZE);
  if (page <= 0) return std::nullopt;
  return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page);
}

std::optional<std::size_t> ParseMemoryLimit(std::string_view text) {
  if (text.empty() || text.size() > 16) return std::nullopt;
  std::size_t bytes = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    bytes = bytes * 10 + static_cast<std::size_t>(c - '0');
  }
  if (bytes == 0 || bytes > (std::size_t{1} << 50)) return std::nullopt;
  return bytes;
}

}  // namespace ncclguard::memory
