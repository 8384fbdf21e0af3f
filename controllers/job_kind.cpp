#include "controllers/job_kind.h"

namespace ncclguard::controllers {

std::string JobKey::ToString() const {
  std::string text(core::KindInfoOf(kind).kind_name);
  text += '/';
  text += namespace_;
  text += '/';
  text += name;
  return text;
}

std::optional<JobKey> JobKey::Parse(std::string_view text) {
  const auto first = text.find('/');
  if (first == std::string_view::npos) return std::nullopt;
  const auto second = text.find('/', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  const auto kind_name = text.substr(0, first);
  const auto ns = text.substr(first + 1, second - first - 1);
  const auto name = text.substr(second + 1);
  if (ns.empty() || name.empty() || name.find('/') != std::string_view::npos) return std::nullopt;
  for (const core::KindInfo& info : core::ManagedKinds()) {
    if (info.kind_name == kind_name) return JobKey{info.kind, std::string(ns), std::string(name)};
  }
  return std::nullopt;
}

}  // namespace ncclguard::controllers
