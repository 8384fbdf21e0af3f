// What the memory allocator holds (jemalloc's statistics), for every process that serves metrics:
// the process's RSS says how much memory it has, these say why. Read at each scrape from
// jemalloc's `mallctl`, looked up at the first scrape: a binary without jemalloc (the unit
// tests) exports nothing here.
#pragma once

#include <prometheus/collectable.h>

#include <vector>

namespace ncclguard::metrics {

class AllocatorCollector final : public prometheus::Collectable {
 public:
  // ncclguard_allocator_bytes{state}; none when the allocator has no statistics to give.
  std::vector<prometheus::MetricFamily> Collect() const override;
  // Whether this process's allocator is jemalloc with its statistics.
  static bool Available();
};

}  // namespace ncclguard::metrics
