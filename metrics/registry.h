// The process's metrics: one prometheus-cpp registry that every part registers its families in
// (as controller-runtime's metrics.Registry), rendered in the text exposition format 0.0.4 by
// whichever server answers GET /metrics. docs/operator.md, "Metrics", lists every family.
#pragma once

#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <string>
#include <string_view>

namespace ncclguard::metrics {

// The registry of this process. Families registered once (a function-local static in the part
// that owns them) live as long as the process.
prometheus::Registry& Global();

// Text exposition (format 0.0.4) of every family in `registry`.
std::string Render(const prometheus::Registry& registry = Global());

// The Content-Type of Render's text.
inline constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

// `count` bucket bounds start, start*factor, start*factor^2 ... (Prometheus' ExponentialBuckets).
prometheus::Histogram::BucketBoundaries ExponentialBuckets(double start, double factor, int count);

}  // namespace ncclguard::metrics
