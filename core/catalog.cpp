#include "core/catalog.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "core/guide.h"

namespace ncclguard::core {
namespace {

// A function-local static, so registrations from other translation units' static initialisers
// find it constructed whatever order those run in.
std::vector<CatalogEntry>& Entries() {
  static std::vector<CatalogEntry> entries;
  return entries;
}

bool Before(const CatalogEntry& a, const CatalogEntry& b) {
  return std::tuple(a.kind, a.order, a.id) < std::tuple(b.kind, b.order, b.id);
}

}  // namespace

std::string_view KindName(FindingKind kind) {
  switch (kind) {
    case FindingKind::Rule:
      return "rule";
    case FindingKind::Check:
      return "check";
    case FindingKind::Diagnosis:
      return "diagnosis";
  }
  return "rule";
}

std::string_view LevelName(FindingLevel level) {
  switch (level) {
    case FindingLevel::Fix:
      return "fix";
    case FindingLevel::Deny:
      return "deny";
    case FindingLevel::Fail:
      return "fail";
    case FindingLevel::Warn:
      return "warn";
    case FindingLevel::Info:
      return "info";
  }
  return "info";
}

void Catalog::Register(const CatalogEntry& entry) {
  const std::string what = std::string(KindName(entry.kind)) + " " + std::string(entry.id);
  if (entry.id.empty()) throw std::logic_error("a " + what + "without an id");
  if (!IsGuideSlug(entry.slug))
    throw std::logic_error(what + " links unknown guide slug " + std::string(entry.slug));
  if (entry.summary.empty() || entry.remedy.empty())
    throw std::logic_error(what + " has no summary or no remedy");
  if (const CatalogEntry* existing = Find(entry.id))
    throw std::logic_error(what + " registered twice (also a " +
                           std::string(KindName(existing->kind)) + ")");
  auto& entries = Entries();
  entries.insert(std::upper_bound(entries.begin(), entries.end(), entry, Before), entry);
}

std::span<const CatalogEntry> Catalog::All() { return Entries(); }

std::span<const CatalogEntry> Catalog::Of(FindingKind kind) {
  const auto& entries = Entries();
  const auto first = std::find_if(entries.begin(), entries.end(),
                                  [&](const CatalogEntry& e) { return e.kind == kind; });
  const auto last =
      std::find_if(first, entries.end(), [&](const CatalogEntry& e) { return e.kind != kind; });
  return {first, last};
}

const CatalogEntry* Catalog::Find(std::string_view id) {
  for (const CatalogEntry& entry : Entries())
    if (entry.id == id) return &entry;
  return nullptr;
}

}  // namespace ncclguard::core
