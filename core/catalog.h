#pragma once

#include <span>
#include <string_view>

namespace ncclguard::core {

// Node checks (probes/) and runtime diagnoses (controllers/) named in docs/rules.md, with the guide
// section each links to. The implementations live at the edges; the ids and slugs live here so
// that every part of ncclguard, and the guide test, agree on them.
struct CatalogEntry {
  std::string_view id;
  std::string_view slug;
};

std::span<const CatalogEntry> NodeChecks();
std::span<const CatalogEntry> Diagnoses();

}  // namespace ncclguard::core
