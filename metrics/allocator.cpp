#include "metrics/allocator.h"

#include <dlfcn.h>
#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>

namespace ncclguard::metrics {
namespace {

using Mallctl = int (*)(const char* name, void* old_value, std::size_t* old_length, void* new_value,
                        std::size_t new_length);

// jemalloc's mallctl when the process links it (cli/CMakeLists.txt), else null.
Mallctl FindMallctl() {
  static const Mallctl found = reinterpret_cast<Mallctl>(dlsym(RTLD_DEFAULT, "mallctl"));
  return found;
}

struct Statistic {
  const char* mallctl_name;
  const char* state;
};

// jemalloc's own words (its manual, "stats.*"). allocated <= active <= resident; metadata is
// part of resident; `retained` is address space only.
constexpr std::array<Statistic, 6> kStatistics{{
    {"stats.allocated", "allocated"},  // bytes in objects the program holds
    {"stats.active", "active"},        // pages holding them: allocated plus the slabs' free slots
    {"stats.metadata", "metadata"},    // the allocator's own bookkeeping
    {"stats.resident", "resident"},    // pages resident: active, metadata and dirty pages
    {"stats.mapped", "mapped"},        // bytes in the active extents it mapped
    {"stats.retained", "retained"},    // unmapped but kept as address space (no memory)
}};

}  // namespace

bool AllocatorCollector::Available() { return FindMallctl() != nullptr; }

std::vector<prometheus::MetricFamily> AllocatorCollector::Collect() const {
  const Mallctl mallctl = FindMallctl();
  if (mallctl == nullptr) return {};
  // The statistics are a snapshot jemalloc refreshes when its epoch advances; one scrape at a
  // time refreshes and reads them.
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  std::uint64_t epoch = 1;
  std::size_t epoch_length = sizeof(epoch);
  if (mallctl("epoch", &epoch, &epoch_length, &epoch, epoch_length) != 0) return {};
  prometheus::MetricFamily family;
  family.name = "ncclguard_allocator_bytes";
  family.help =
      "Memory the allocator (jemalloc) holds, by state: allocated (the program's objects), active "
      "(their pages), metadata, resident (in RAM: active, metadata and freed pages not yet "
      "returned), mapped, retained (address space only).";
  family.type = prometheus::MetricType::Gauge;
  for (const Statistic& statistic : kStatistics) {
    std::size_t value = 0;
    std::size_t length = sizeof(value);
    if (mallctl(statistic.mallctl_name, &value, &length, nullptr, 0) != 0) continue;
    prometheus::ClientMetric metric;
    metric.label.push_back({"state", statistic.state});
    metric.gauge.value = static_cast<double>(value);
    family.metric.push_back(std::move(metric));
  }
  if (family.metric.empty()) return {};
  return {std::move(family)};
}

}  // namespace ncclguard::metrics
