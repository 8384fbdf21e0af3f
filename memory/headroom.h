// Room under a container's memory limit. The webhook shares its process, and so its container's
// limit, with the controller, whose caches grow with the cluster: the memory its reviews in
// flight may hold is what the limit leaves beside everything else, not a fixed figure.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace ncclguard::memory {

// Never less than this for the reviews in flight, however little room is left: a handful of
// ordinary reviews (tens of KiB each) still fit, so a process near its limit refuses the large
// reviews that would take it over, not every admission.
inline constexpr std::size_t kInFlightFloor = std::size_t{8} << 20;

// What is kept free under the limit beside the reviews: an eighth of it, at least 32 MiB (pages
// the allocator keeps for a second after a burst, thread stacks, what a refused review's
// unwinding takes).
std::size_t LimitReserve(std::size_t memory_limit);

// What the reviews in flight may hold together under `memory_limit`, when the process has
// `resident` bytes resident of which `in_flight` are what the reviews allocated: the limit less
// the reserve and less the rest of the process, at most `configured`, at least kInFlightFloor (or
// `configured`, if smaller). A body taken from the budget but not yet read is not resident: it
// must not be in `in_flight`, or the rest of the process would read small by it and every
// review held so would raise the capacity by its own size.
std::size_t InFlightCapacity(std::size_t memory_limit, std::size_t resident, std::size_t in_flight,
                             std::size_t configured);

// A memory limit as the Kubernetes downward API writes it (resourceFieldRef limits.memory with
// the default divisor: a whole number of bytes). nullopt for anything else: empty, a sign, a
// suffix, a fraction, zero, more than 2^50.
std::optional<std::size_t> ParseMemoryLimit(std::string_view text);

}  // namespace ncclguard::memory
