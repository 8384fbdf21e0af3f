// The tests' reader of Prometheus' text format: the value of one sample line.
#pragma once

#include <optional>
#include <string>

namespace ncclguard::testing {

// The value of the sample `series` (name and labels exactly as rendered, e.g.
// `ncclguard_gate_releases_total{kind="Job"}`) in `text`; nullopt when there is no such line.
inline std::optional<double> MetricSample(const std::string& text, const std::string& series) {
  const std::string prefix = series + " ";
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (text.compare(at, prefix.size(), prefix) == 0) {
      return std::stod(text.substr(at + prefix.size(), end - at - prefix.size()));
    }
    at = end + 1;
  }
  return std::nullopt;
}

}  // namespace ncclguard::testing
