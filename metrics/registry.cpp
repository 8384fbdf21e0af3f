#include "metrics/registry.h"

#include "metrics/allocator.h"

#include <prometheus/gauge.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace ncclguard::metrics {
namespace {

// ncclguard_build_info{version} 1: which build answers, in every process that serves metrics.
void RegisterBuildInfo(prometheus::Registry& registry) {
  prometheus::BuildGauge()
      .Name("ncclguard_build_info")
      .Help("Always 1; the version of ncclguard this process runs.")
      .Register(registry)
      .Add({{"version", NCCLGUARD_VERSION}})
      .Set(1);
}

// The collectors of every registry. Render holds the mutex while they collect, so a registration
// ends only once no scrape uses its collector.
struct Collectors {
  std::mutex mutex;
  std::vector<std::pair<const prometheus::Registry*, const prometheus::Collectable*>> entries;
};

Collectors& AllCollectors() {
  static Collectors* collectors = new Collectors();  // never destroyed: used until exit
  return *collectors;
}

}  // namespace

prometheus::Registry& Global() {
  static prometheus::Registry* registry = [] {
    auto* created = new prometheus::Registry();  // never destroyed: used until exit
    RegisterBuildInfo(*created);
    // What the allocator holds, beside the RSS: every process that serves metrics.
    static const AllocatorCollector allocator;
    std::lock_guard lock(AllCollectors().mutex);
    AllCollectors().entries.emplace_back(created, &allocator);
    return created;
  }();
  return *registry;
}

std::string Render(const prometheus::Registry& registry) {
  std::vector<prometheus::MetricFamily> families = registry.Collect();
  Collectors& collectors = AllCollectors();
  {
    std::lock_guard lock(collectors.mutex);
    for (const auto& [owner, collector] : collectors.entries) {
      if (owner != &registry) continue;
      for (prometheus::MetricFamily& family : collector->Collect()) {
        families.push_back(std::move(family));
      }
    }
  }
  return prometheus::TextSerializer().Serialize(families);
}

CollectorRegistration::CollectorRegistration(const prometheus::Registry& registry,
                                             const prometheus::Collectable& collector)
    : registry_(&registry), collector_(&collector) {
  Collectors& collectors = AllCollectors();
  std::lock_guard lock(collectors.mutex);
  collectors.entries.emplace_back(registry_, collector_);
}

CollectorRegistration::~CollectorRegistration() {
  Collectors& collectors = AllCollectors();
  std::lock_guard lock(collectors.mutex);
  const auto entry = std::find(collectors.entries.begin(), collectors.entries.end(),
                               std::pair{registry_, collector_});
  if (entry != collectors.entries.end()) collectors.entries.erase(entry);
}

prometheus::Histogram::BucketBoundaries ExponentialBuckets(double start, double factor, int count) {
  prometheus::Histogram::BucketBoundaries bounds;
  double bound = start;
  for (int i = 0; i < count; ++i) {
    bounds.push_back(bound);
    bound *= factor;
  }
  return bounds;
}

}  // namespace ncclguard::metrics
