#include "core/rules/rule_util.h"

#include <cctype>

namespace ncclguard::core::rules {

std::vector<std::string> Split(std::string_view text, char separator) {
  std::vector<std::string> pieces;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find(separator, start);
    pieces.emplace_back(
        text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return pieces;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

std::string ContainerLabel(const Container& c) {
  if (!c.name.empty()) return "container \"" + c.name + "\"";
  return "container " + c.at.back();
}

std::int64_t RankPods(const Workload& workload) {
  std::int64_t pods = 0;
  for (const PodTemplate& tmpl : workload.templates) {
    if (workload.kind == WorkloadKind::MpiJob && tmpl.role == "Launcher") continue;
    pods += tmpl.pods;
  }
  return pods;
}

}  // namespace ncclguard::core::rules
