// The process's metrics: one prometheus-cpp registry that every part registers its families in
// (as controller-runtime's metrics.Registry), rendered in the text exposition format 0.0.4 by
// whichever server answers GET /metrics. docs/operator.md, "Metrics", lists every family.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace ncclguard::metrics {

// The registry of this process. Families registered once (a function-local static in the part
// that owns them) live as long as the process.
prometheus::Registry& Global();

// Text exposition (format 0.0.4) of every family in `registry` and of the collectors registered
// with it.
std::string Render(const prometheus::Registry& registry = Global());

// A collector that also writes families as exposition text itself, after the others: for a
// family of tens of thousands of series, where prometheus-cpp's form (a ClientMetric, its
// labels and their strings, for each series) would be built only to be serialized (at 5,000
// nodes x 14 checks, 30 MB a scrape; BENCHMARKS.md, "Metrics"). Its family names must not be
// any other's.
class TextCollectable : public prometheus::Collectable {
 public:
  virtual void CollectText(std::string& out) const = 0;
};

// Writes one gauge family's exposition text: # HELP and # TYPE, then each sample.
class TextFamily {
 public:
  TextFamily(std::string_view name, std::string_view help, std::string& out);
  // A sample with these labels (names as given, values escaped: \\, \", \n).
  void Add(std::initializer_list<std::pair<std::string_view, std::string_view>> labels,
           double value);

 private:
  std::string name_;
  std::string& out_;
};

// Families a part builds when it is scraped, from state it keeps anyway (an informer cache): such
// a gauge has nothing to update as the state changes, and no series outlives what it describes.
// `collector` is rendered with `registry` while this lives; destroying it waits for a scrape in
// progress, so what the collector reads may go right after.
class CollectorRegistration {
 public:
  CollectorRegistration(const prometheus::Registry& registry,
                        const prometheus::Collectable& collector);
  ~CollectorRegistration();
  CollectorRegistration(const CollectorRegistration&) = delete;
  CollectorRegistration& operator=(const CollectorRegistration&) = delete;

 private:
  const prometheus::Registry* registry_;
  const prometheus::Collectable* collector_;
};

// The Content-Type of Render's text.
inline constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

// Orders std::pair<std::string, ...> keys as (string_view, Second), so that a map from label
// values to a series is searched with views: the hot paths build no string on a lookup.
template <typename Second = std::string_view>
struct ViewPairLess {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    using View = std::pair<std::string_view, Second>;
    return View(a.first, a.second) < View(b.first, b.second);
  }
};

// `count` bucket bounds start, start*factor, start*factor^2 ... (Prometheus' ExponentialBuckets).
prometheus::Histogram::BucketBoundaries ExponentialBuckets(double start, double factor, int count);

}  // namespace ncclguard::metrics
