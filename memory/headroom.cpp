#include "memory/headroom.h"

#include <algorithm>

namespace ncclguard::memory {

std::size_t LimitReserve(std::size_t memory_limit) {
  return std::max(memory_limit / 8, std::size_t{32} << 20);
}

std::size_t InFlightCapacity(std::size_t memory_limit, std::size_t resident, std::size_t in_flight,
                             std::size_t configured) {
  const std::size_t floor = std::min(kInFlightFloor, configured);
  // The rest of the process: what is resident beyond the reviews' allocations. A body the
  // listener has read is resident, so it is counted here and in the budget: the room reads
  // small by it, never large.
  const std::size_t others = resident > in_flight ? resident - in_flight : 0;
  const std::size_t taken = others + LimitReserve(memory_limit);
  if (taken >= memory_limit) return floor;
  return std::clamp(memory_limit - taken, floor, configured);
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
