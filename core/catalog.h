#pragma once

#include <span>
#include <string_view>

namespace ncclguard::core {

// Everything ncclguard can find, of three kinds: admission rules (core/rules/), node checks
// (probes/checks/) and runtime diagnoses (controllers/diagnoses/). Each registers its
// description here from its own file, together with its implementation; `ncclguard explain`,
// docs/rules.md, the guide's index and the chart's list of check ids are generated from it.
enum class FindingKind { Rule, Check, Diagnosis };

// The most a finding of its kind does. A rule fixes, denies or warns at admission (the policy
// may change it per rule); a node check at worst fails (the node is not validated) or warns, or
// only reports what it sees (info); a diagnosis is a Warning Event on the job (warn).
enum class FindingLevel { Fix, Deny, Fail, Warn, Info };

std::string_view KindName(FindingKind kind);     // "rule", "check", "diagnosis"
std::string_view LevelName(FindingLevel level);  // "fix", "deny", "fail", "warn", "info"

struct CatalogEntry {
  std::string_view id;
  FindingKind kind;
  FindingLevel level;
  std::string_view slug;     // the docs/guide.md section it links
  std::string_view summary;  // what it finds, one sentence
  std::string_view remedy;   // what to do about it
  // Place among its kind: the order the probe runs checks in, a diagnosis's rank (the first
  // found names the NcclDiagnosis condition); rules are 0, listed by id.
  int order = 0;
  // Set when what is found decides the section linked (the gate's hold links its cause's):
  // which section, in words.
  std::string_view slug_note = {};
};

// Filled during static initialisation (every entry registered from its own file, so the
// libraries holding them are linked whole), read-only afterwards.
class Catalog {
 public:
  // Throws std::logic_error for an id registered twice (ids are unique across kinds), a slug
  // that is not a guide section, or an empty summary or remedy: a programming error, caught
  // at start-up.
  static void Register(const CatalogEntry& entry);
  // Grouped by kind (rules, checks, diagnoses), then by (order, id).
  static std::span<const CatalogEntry> All();
  static std::span<const CatalogEntry> Of(FindingKind kind);
  static const CatalogEntry* Find(std::string_view id);
};

}  // namespace ncclguard::core
