#pragma once

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "controllers/gate.h"
#include "controllers/log_scan.h"
#include "core/json.h"
#include "core/registry.h"

namespace ncclguard::controllers {

using core::Json;

// What a diagnosis sees of one job: its pods, the Events about the job and its pods, the
// NodeValidations of the nodes its pods run on, and the gate's verdict while it holds the job.
struct DiagnosisContext {
  const Json& job;
  const std::vector<Json>& pods;
  const std::vector<Json>& events;
  const std::map<std::string, Json, std::less<>>& node_validations;  // by node name
  const GateVerdict* held = nullptr;                                 // set while the gate holds
  // What the job's pods' logs showed (controllers/log_scan.h), when they were read: each finding
  // adds its message and evidence to its diagnosis' lines.
  const std::vector<LogFinding>* log_findings = nullptr;
};

struct DiagnosisInfo {
  std::string_view id;    // kebab-case (docs/contract.md); listed in docs/rules.md
  std::string_view slug;  // guide section (Diagnosis::Slug may name another for a cause)
  // Lower runs first; the highest-ranked diagnosis found names the NcclDiagnosis condition.
  int rank;
  std::string_view summary;  // what it is seen in, one sentence
  std::string_view remedy;   // one sentence, appended to Event notes
  // When Diagnosis::Slug names another section for a cause: which one, in words (`explain`).
  std::string_view slug_note = {};
};

// One runtime diagnosis: one file in controllers/diagnoses/, registered by id with its
// description (core::Catalog; a diagnosis is a Warning Event, level warn).
class Diagnosis {
 public:
  using RegistryEntry = Diagnosis;  // NCCLGUARD_REGISTER(MyDiagnosis) adds it to DiagnosisRegistry
  explicit Diagnosis(DiagnosisInfo info) : info_(info) {}
  virtual ~Diagnosis() = default;
  const DiagnosisInfo& Info() const { return info_; }
  // What this diagnosis sees in the job, one line per pod/container/node ("" = nothing).
  // Lines must be stable for a stable state: Events are de-duplicated on their text.
  virtual std::vector<std::string> Find(const DiagnosisContext& context) const = 0;
  // The guide section its Event and condition link for what Find saw: the registered one, unless
  // the cause decides (the gate's hold links the section of what held the job).
  virtual std::string_view Slug(const DiagnosisContext& /*context*/) const { return info_.slug; }

 private:
  DiagnosisInfo info_;
};

// Sorted by rank, then id.
using DiagnosisRegistry = core::Registry<Diagnosis>;

struct DiagnosisFinding {
  const Diagnosis* diagnosis;
  std::vector<std::string> lines;
  std::string_view slug;  // the guide section to link (Diagnosis::Slug)
};

// A log finding as one diagnosis line: its message and its first evidence line.
std::string LogFindingLine(const LogFinding& finding);

// Every registered diagnosis that finds something (in the job's state or its logs), in rank
// order.
std::vector<DiagnosisFinding> Diagnose(const DiagnosisContext& context);

}  // namespace ncclguard::controllers

namespace ncclguard::core {

// A diagnosis also registers its description in core::Catalog (a Warning Event, level warn),
// which rejects an unknown guide slug.
template <>
struct RegistryTraits<controllers::Diagnosis> {
  static constexpr std::string_view kKind = "diagnosis";
  static std::string_view Id(const controllers::Diagnosis& d) { return d.Info().id; }
  static int Order(const controllers::Diagnosis& d) { return d.Info().rank; }
  static void OnRegister(const controllers::Diagnosis& diagnosis);
};

}  // namespace ncclguard::core
