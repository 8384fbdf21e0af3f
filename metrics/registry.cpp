#include "metrics/registry.h"

#include <prometheus/gauge.h>
#include <prometheus/text_serializer.h>

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

}  // namespace

prometheus::Registry& Global() {
  static prometheus::Registry* registry = [] {
    auto* created = new prometheus::Registry();  // never destroyed: used until exit
    RegisterBuildInfo(*created);
    return created;
  }();
  return *registry;
}

std::string Render(const prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
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
