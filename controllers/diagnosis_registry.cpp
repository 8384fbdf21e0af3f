#include <algorithm>

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

// The catalog rejects a duplicate id or an unknown guide slug: a programming error caught at
// start-up.
DiagnosisRegistry::Registrar::Registrar(std::unique_ptr<Diagnosis> diagnosis) {
  const DiagnosisInfo& info = diagnosis->Info();
  core::Catalog::Register({info.id, core::FindingKind::Diagnosis, core::FindingLevel::Warn,
                           info.slug, info.summary, info.remedy, info.rank});
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

std::string LogFindingLine(const LogFinding& finding) {
  std::string line = finding.message;
  if (!finding.evidence.empty()) line += " (log: \"" + finding.evidence.front().text + "\")";
  return line;
}

std::vector<DiagnosisFinding> Diagnose(const DiagnosisContext& context) {
  std::vector<DiagnosisFinding> findings;
  for (const Diagnosis* diagnosis : DiagnosisRegistry::All()) {
    std::vector<std::string> lines = diagnosis->Find(context);
    if (context.log_findings != nullptr) {
      for (const LogFinding& f : *context.log_findings) {
        if (f.id == diagnosis->Info().id) lines.push_back(LogFindingLine(f));
      }
    }
    if (!lines.empty()) findings.push_back({diagnosis, std::move(lines)});
  }
  return findings;
}

}  // namespace ncclguard::controllers
