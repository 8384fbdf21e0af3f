#include "metrics/registry.h"

#include "metrics/allocator.h"

#include <prometheus/gauge.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <atomic>
#include <charconv>
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
    // What the allocator holds, beside the RSS: every process that serves metrics. Never
    // destroyed either: a scrape at exit may still read it. (Global() is first called before any
    // collector is registered, so this never runs under Render's lock.)
    static const auto* allocator = new AllocatorCollector();
    std::lock_guard lock(AllCollectors().mutex);
    AllCollectors().entries.emplace_back(created, allocator);
    return created;
  }();
  return *registry;
}

std::string Render(const prometheus::Registry& registry) {
  std::vector<prometheus::MetricFamily> families = registry.Collect();
  std::vector<const TextCollectable*> texts;
  Collectors& collectors = AllCollectors();
  std::lock_guard lock(collectors.mutex);  // held until the text collectors are done too
  for (const auto& [owner, collector] : collectors.entries) {
    if (owner != &registry) continue;
    for (prometheus::MetricFamily& family : collector->Collect()) {
      families.push_back(std::move(family));
    }
    if (const auto* text = dynamic_cast<const TextCollectable*>(collector)) texts.push_back(text);
  }
  // Reserved at the last scrape's size: a text of megabytes (5,000 nodes' checks) grown by
  // doubling would hold its old and new buffers at once, each time.
  static std::atomic<std::size_t> last_size{0};
  std::string out;
  out.reserve(last_size.load(std::memory_order_relaxed) + last_size / 16);
  out += prometheus::TextSerializer().Serialize(families);
  families.clear();
  for (const TextCollectable* text : texts) text->CollectText(out);
  last_size.store(out.size(), std::memory_order_relaxed);
  return out;
}

namespace {

// The exposition format's escapes: a backslash and a newline in a HELP text, and a double quote
// as well in a label value (`quote`).
void AppendEscaped(std::string& out, std::string_view text, bool quote) {
  for (const char c : text) {
    if (c == '\\' || (quote && c == '"')) {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(c);
    }
  }
}

}  // namespace

TextFamily::TextFamily(std::string_view name, std::string_view help, std::string& out)
    : name_(name), out_(out) {
  out_.append("# HELP ").append(name_).append(" ");
  AppendEscaped(out_, help, /*quote=*/false);
  out_.append("\n# TYPE ").append(name_).append(" gauge\n");
}

void TextFamily::Add(std::initializer_list<std::pair<std::string_view, std::string_view>> labels,
                     double value) {
  out_.append(name_);
  char separator = '{';
  for (const auto& [label, text] : labels) {
    out_.push_back(separator);
    separator = ',';
    out_.append(label).append("=\"");
    AppendEscaped(out_, text, /*quote=*/true);
    out_.push_back('"');
  }
  if (separator == ',') out_.push_back('}');
  out_.push_back(' ');
  char number[32];
  const auto written = std::to_chars(number, number + sizeof(number), value);
  out_.append(number, written.ptr).push_back('\n');
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
