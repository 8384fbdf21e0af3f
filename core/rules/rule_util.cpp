#include "core/rules/rule_util.h"

#include <algorithm>
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

std::optional<std::string> FirstUnknownNcclName(std::string_view value,
                                                std::span<const std::string_view> known) {
  if (value.empty()) return std::nullopt;  // NCCL treats an empty variable as unset
  for (const std::string& part : Split(value, ';')) {
    std::string_view list = part;
    if (const auto colon = list.find(':'); colon != std::string_view::npos)
      list.remove_prefix(colon + 1);
    if (!list.empty() && list.front() == '^') list.remove_prefix(1);
    for (const std::string& name : Split(list, ',')) {
      const bool ok = !name.empty() &&
                      std::any_of(known.begin(), known.end(),
                                  [&](std::string_view k) { return EqualsIgnoreCase(k, name); });
      if (!ok) return name;
    }
  }
  return std::nullopt;
}

std::string ContainerLabel(const Container& c) {
  if (!c.name.empty()) return "container \"" + c.name + "\"";
  return "container " + c.at.back();
}

bool DistributedTrainingContainer(const TemplateContext& ctx, const Container& c) {
  if (!c.IsGpu() || c.has_env_from) return false;
  return RankPods(ctx.workload) > 1 || ctx.facts.IsEfaContainer(c) || c.Env("MASTER_ADDR") ||
         c.Env("WORLD_SIZE");
}

}  // namespace ncclguard::core::rules
