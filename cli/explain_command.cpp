// `ncclguard explain`: one rule, node check or diagnosis by id; without one, the list of all.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <memory>
#include <vector>

#include "cli/commands.h"
#include "cli/policy_flags.h"
#include "core/catalog.h"
#include "core/errors.h"
#include "core/guide.h"
#include "core/json.h"
#include "core/rule.h"

namespace ncclguard::cli {
namespace {

using core::CatalogEntry;
using core::FindingKind;

struct ExplainOptions {
  std::string id;
  bool all = false;          // explain every one
  bool markdown = false;     // docs/rules.md
  bool guide_index = false;  // the index of docs/guide.md
  bool json = false;         // every one, as a JSON array
  PolicyOptions policy;
};

struct KindText {
  FindingKind kind;
  std::string_view heading;
  std::string_view where;  // where its findings show up
};

constexpr KindText kKinds[] = {
    {FindingKind::Rule, "Admission rules", "admission webhook, `ncclguard lint` and `fix`"},
    {FindingKind::Check, "Node checks",
     "probe DaemonSet, NodeValidation status, `ncclguard probe`"},
    {FindingKind::Diagnosis, "Runtime diagnoses",
     "controller: a Warning Event on the job, the NcclDiagnosis condition"},
};

const KindText& TextOf(FindingKind kind) {
  return *std::find_if(std::begin(kKinds), std::end(kKinds),
                       [&](const KindText& text) { return text.kind == kind; });
}

std::string_view ScopeName(core::RuleScope scope) {
  return scope == core::RuleScope::Pod ? "pod" : "job";
}

// What ncclguard does with a finding of this entry under the policy: a rule's level may be
// changed or the rule turned off; checks and diagnoses are as registered.
std::string Action(const CatalogEntry& entry, const core::Policy& policy) {
  const core::Rule* rule =
      entry.kind == FindingKind::Rule ? core::RuleRegistry::Find(entry.id) : nullptr;
  if (rule == nullptr) return std::string(core::LevelName(entry.level));
  return std::string(core::LevelName(policy.EffectiveLevel(entry.id, rule->Info().action)));
}

void PrintEntry(const CatalogEntry& entry, const core::Policy& policy) {
  std::cout << entry.id << "\n  kind:   " << core::KindName(entry.kind) << " ("
            << TextOf(entry.kind).where << ")\n  action: " << Action(entry, policy);
  if (entry.kind == FindingKind::Rule) {
    if (const core::Rule* rule = core::RuleRegistry::Find(entry.id)) {
      std::cout << " (" << ScopeName(rule->Info().scope) << " level)"
                << (policy.RuleEnabled(entry.id) ? "" : ", disabled by policy");
    }
  } else if (entry.kind == FindingKind::Check) {
    std::cout << (entry.level == core::FindingLevel::Info
                      ? " (it reports what it sees: Pass or Skip)"
                      : " (the worst status it reports)");
  }
  std::cout << "\n  what:   " << entry.summary << "\n  fix:    " << entry.remedy
            << "\n  guide:  " << core::GuideLink(policy.guide_base_url, entry.slug);
  if (!entry.slug_note.empty()) std::cout << ", or " << entry.slug_note;
  std::cout << "\n";
}

std::string Padded(std::string_view text, std::size_t width) {
  std::string padded(text);
  padded.resize(std::max(width, text.size()), ' ');
  return padded;
}

// Every id, grouped by kind, with its level under the policy and its guide section.
void PrintList(const core::Policy& policy) {
  std::size_t width = 0;
  for (const CatalogEntry& entry : core::Catalog::All()) width = std::max(width, entry.id.size());
  for (const KindText& text : kKinds) {
    std::cout << text.heading << " (" << text.where << "):\n";
    for (const CatalogEntry& entry : core::Catalog::Of(text.kind)) {
      const bool off = entry.kind == FindingKind::Rule && !policy.RuleEnabled(entry.id);
      std::cout << "  " << Padded(entry.id, width + 2)
                << Padded(off ? "off" : Action(entry, policy), 6) << entry.slug << "\n";
    }
    std::cout << "\n";
  }
  std::cout << "`ncclguard explain ID` explains one, `ncclguard explain --all` every one.\n";
}

void PrintAll(const core::Policy& policy) {
  for (const KindText& text : kKinds) {
    std::cout << text.heading << " (" << text.where << "):\n\n";
    for (const CatalogEntry& entry : core::Catalog::Of(text.kind)) {
      PrintEntry(entry, policy);
      std::cout << "\n";
    }
  }
}

// Text in a Markdown table cell: a '|' would end the cell, a '*' (as in /dev/shm/nccl-*) start
// emphasis.
std::string Cell(std::string_view text) {
  std::string cell;
  for (const char c : text) {
    if (c == '|' || c == '*') cell += '\\';
    cell += c;
  }
  return cell;
}

void PrintTable(FindingKind kind, std::string_view what, const core::Policy& policy) {
  const bool rules = kind == FindingKind::Rule;
  std::cout << "| id | level | " << (rules ? "scope | " : "") << "guide | " << what
            << " | what to do |\n|---|---|" << (rules ? "---|" : "") << "---|---|---|\n";
  for (const CatalogEntry& entry : core::Catalog::Of(kind)) {
    std::cout << "| `" << entry.id << "` | " << core::LevelName(entry.level) << " | ";
    if (rules) {
      const core::Rule* rule = core::RuleRegistry::Find(entry.id);
      std::cout << (rule != nullptr ? ScopeName(rule->Info().scope) : "") << " | ";
    }
    std::cout << "[" << entry.slug << "](" << core::GuideLink(policy.guide_base_url, entry.slug)
              << ")" << (entry.slug_note.empty() ? "" : ", or " + Cell(entry.slug_note)) << " | "
              << Cell(entry.summary) << " | " << Cell(entry.remedy) << " |\n";
  }
}

// docs/rules.md, generated so that the docs never drift from the code.
void PrintMarkdown(const core::Policy& policy) {
  std::cout
      << "# ncclguard rules, node checks and diagnoses\n\n"
         "Generated from the registry (core/catalog.h) by `scripts/gen-docs.sh`, which runs "
         "`ncclguard explain --markdown --guide-base-url guide.md`: do not edit. The "
         "`generated_docs` test fails when this file, the guide's index or the chart's list of "
         "check ids disagrees with the code. Each guide link points into [guide.md](guide.md).\n\n"
         "Each rule, node check and diagnosis is one file that registers its id, level, guide "
         "section, summary and remedy: core/rules/, probes/checks/, controllers/diagnoses/. "
         "`ncclguard explain ID` prints one; `ncclguard explain` lists them all.\n\n"
         "What a level means:\n\n"
         "| kind | level | meaning |\n|---|---|---|\n"
         "| rule | fix | the mutating webhook (and `ncclguard fix`) adds what is missing; a value "
         "the user set is kept |\n"
         "| rule | deny | the validating webhook rejects the object; `ncclguard lint` exits 1 |\n"
         "| rule | warn | the object is admitted with a warning |\n"
         "| check | fail | the worst status the check reports is Fail: the node's NodeValidation "
         "fails and the gate does not count the node as validated |\n"
         "| check | warn | the worst status is Warn: reported, and the node still counts as "
         "validated |\n"
         "| check | info | reports what it sees (Pass or Skip), for diagnoses to compare across "
         "nodes |\n"
         "| diagnosis | warn | a Warning Event on the job; of those found, the first in the "
         "table's order names the NcclDiagnosis condition |\n\n"
         "A policy may change a rule's level or turn it off (`rules: {<id>: {level: warn}}`, "
         "`{enabled: false}`). Any check that throws or does not answer within the check "
         "timeout reports Fail, whatever its level.\n\n"
         "An audit (`ncclguard audit`, the controller's PolicyReports) fixes and denies nothing: "
         "it reports each rule's finding as a result. deny: fail; fix: fail on a Pod (it runs "
         "without it), warn on a job (its pods are fixed when created); warn: warn; no finding: "
         "pass. `ncclguard audit` exits 1 on a fail.\n\n";
  std::cout << "## " << TextOf(FindingKind::Rule).heading << "\n\n";
  PrintTable(FindingKind::Rule, "condition", policy);
  std::cout << "\n## " << TextOf(FindingKind::Check).heading
            << "\n\nIn the order the probe runs and reports them.\n\n";
  PrintTable(FindingKind::Check, "what it checks", policy);
  std::cout << "\n## " << TextOf(FindingKind::Diagnosis).heading
            << "\n\nIn rank order: the first found names the NcclDiagnosis condition.\n\n";
  PrintTable(FindingKind::Diagnosis, "seen in", policy);
}

// The index of docs/guide.md: every id and the section it links, alphabetically.
void PrintGuideIndex() {
  std::vector<const CatalogEntry*> entries;
  for (const CatalogEntry& entry : core::Catalog::All()) entries.push_back(&entry);
  std::sort(entries.begin(), entries.end(),
            [](const CatalogEntry* a, const CatalogEntry* b) { return a->id < b->id; });
  std::cout << "| id | kind | section |\n|---|---|---|\n";
  for (const CatalogEntry* entry : entries) {
    const auto sections = core::GuideSections();
    const auto section =
        std::find_if(sections.begin(), sections.end(),
                     [&](const core::GuideSection& s) { return s.slug == entry->slug; });
    std::cout << "| `" << entry->id << "` | " << core::KindName(entry->kind) << " | ["
              << section->number << ". " << section->title << "](#" << entry->slug << ") |\n";
  }
}

void PrintJson(const core::Policy& policy) {
  core::Json all = core::Json::array();
  for (const CatalogEntry& entry : core::Catalog::All()) {
    all.push_back({{"id", entry.id},
                   {"kind", core::KindName(entry.kind)},
                   {"level", core::LevelName(entry.level)},
                   {"summary", entry.summary},
                   {"remedy", entry.remedy},
                   {"slug", entry.slug},
                   {"guide", core::GuideLink(policy.guide_base_url, entry.slug)}});
    if (!entry.slug_note.empty()) all.back()["guideNote"] = entry.slug_note;
  }
  std::cout << all.dump(2) << "\n";
}

int RunExplain(const ExplainOptions& explain) {
  const core::Policy policy = LoadPolicy(explain.policy);
  if (explain.markdown) {
    PrintMarkdown(policy);
  } else if (explain.guide_index) {
    PrintGuideIndex();
  } else if (explain.json) {
    PrintJson(policy);
  } else if (explain.all) {
    PrintAll(policy);
  } else if (explain.id.empty()) {
    PrintList(policy);
  } else if (const CatalogEntry* entry = core::Catalog::Find(explain.id)) {
    PrintEntry(*entry, policy);
  } else {
    throw core::InputError("no rule, node check or diagnosis named \"" + explain.id +
                           "\" (`ncclguard explain` lists them)");
  }
  return kExitClean;
}

}  // namespace

Command AddExplainCommand(CLI::App& app) {
  auto options = std::make_shared<ExplainOptions>();
  CLI::App* command = app.add_subcommand(
      "explain", "explain a rule, node check or diagnosis (without an id: list them all)");
  command->add_option("id", options->id, "rule, node check or diagnosis id");
  command->add_flag("--all", options->all, "explain every rule, node check and diagnosis");
  command->add_flag("--markdown", options->markdown,
                    "print docs/rules.md (every rule, node check and diagnosis) as Markdown");
  command->add_flag("--guide-index", options->guide_index,
                    "print the index of docs/guide.md (every id and its section) as Markdown");
  command->add_flag("--json", options->json,
                    "print every rule, node check and diagnosis as a JSON array");
  AddPolicyFlags(*command, options->policy);
  return {command, [options] { return RunExplain(*options); }};
}

}  // namespace ncclguard::cli
