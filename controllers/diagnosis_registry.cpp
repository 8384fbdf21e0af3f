#include <algorithm>
#include <stdexcept>

#include "controllers/diagnosis.h"
#include "core/catalog.h"

namespace ncclguard::controllers {
namespace {

struct Registry {
  std::vector<std::unique_ptr<Diagnosis>> owned;
  std::vector<const Diagnosis*> sorted;
};

Registry& TheRegistry() {
  static Registry registry;
  return registry;
}

bool Before(const Diagnosis* a, const Diagnosis* b) {
  if (a->Info().rank != b->Info().rank) return a->Info().rank < b->Info().rank;
  return a->Info().id < b->Info().id;
}

}  // namespace

// The catalog in core/ is the contract: a diagnosis that is not in it, or links another guide
// section, is a programming error caught at start-up.
DiagnosisRegistry::Registrar::Registrar(std::unique_ptr<Diagnosis> diagnosis) {
  const DiagnosisInfo& info = diagnosis->Info();
  const auto catalog = core::Diagnoses();
  const auto entry = std::find_if(catalog.begin(), catalog.end(),
                                  [&](const core::CatalogEntry& e) { return e.id == info.id; });
  if (entry == catalog.end()) {
    throw std::logic_error("diagnosis " + std::string(info.id) + " is not in core::Diagnoses()");
  }
  if (entry->slug != info.slug) {
    throw std::logic_error("diagnosis " + std::string(info.id) + " links " +
                           std::string(info.slug) + ", the catalog says " +
                           std::string(entry->slug));
  }
  if (Find(info.id) != nullptr) {
    throw std::logic_error("diagnosis registered twice: " + std::string(info.id));
  }
  Registry& registry = TheRegistry();
  const Diagnosis* raw = diagnosis.get();
  registry.owned.push_back(std::move(diagnosis));
  registry.sorted.insert(
      std::lower_bound(registry.sorted.begin(), registry.sorted.end(), raw, Before), raw);
}

std::span<const Diagnosis* const> DiagnosisRegistry::All() { return TheRegistry().sorted; }

const Diagnosis* DiagnosisRegistry::Find(std::string_view id) {
  for (const Diagnosis* diagnosis : TheRegistry().sorted) {
    if (diagnosis->Info().id == id) return diagnosis;
  }
  return nullptr;
}

std::vector<DiagnosisFinding> Diagnose(const DiagnosisContext& context) {
  std::vector<DiagnosisFinding> findings;
  for (const Diagnosis* diagnosis : DiagnosisRegistry::All()) {
    std::vector<std::string> lines = diagnosis->Find(context);
    if (!lines.empty()) findings.push_back({diagnosis, std::move(lines)});
  }
  return findings;
}

}  // namespace ncclguard::controllers
