#include "controllers/diagnosis.h"
#include "core/catalog.h"

namespace ncclguard::controllers {

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
    if (!lines.empty()) findings.push_back({diagnosis, std::move(lines), diagnosis->Slug(context)});
  }
  return findings;
}

}  // namespace ncclguard::controllers

namespace ncclguard::core {

void RegistryTraits<controllers::Diagnosis>::OnRegister(const controllers::Diagnosis& diagnosis) {
  const controllers::DiagnosisInfo& info = diagnosis.Info();
  Catalog::Register({info.id, FindingKind::Diagnosis, FindingLevel::Warn, info.slug, info.summary,
                     info.remedy, info.rank, info.slug_note});
}

}  // namespace ncclguard::core
