// The one registry of what ncclguard can find: every rule, node check and diagnosis registers
// its description from its own file, and the registry refuses what would make docs or links lie.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <tuple>

#include "controllers/diagnosis.h"
#include "core/catalog.h"
#include "core/rule.h"
#include "probes/check.h"

namespace ncclguard::test {
namespace {

using core::Catalog;
using core::CatalogEntry;
using core::FindingKind;
using core::FindingLevel;

TEST(Catalog, HoldsEveryImplementationOnceGroupedByKindInOrder) {
  const auto all = Catalog::All();
  EXPECT_EQ(Catalog::Of(FindingKind::Rule).size(), core::RuleRegistry::All().size());
  EXPECT_EQ(Catalog::Of(FindingKind::Check).size(), probes::CheckRegistry::All().size());
  EXPECT_EQ(Catalog::Of(FindingKind::Diagnosis).size(),
            controllers::DiagnosisRegistry::All().size());
  EXPECT_EQ(all.size(), Catalog::Of(FindingKind::Rule).size() +
                            Catalog::Of(FindingKind::Check).size() +
                            Catalog::Of(FindingKind::Diagnosis).size());

  std::set<std::string_view> ids;
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_TRUE(ids.insert(all[i].id).second) << all[i].id;
    EXPECT_EQ(Catalog::Find(all[i].id), &all[i]);
    if (i > 0) {
      EXPECT_LT(std::tuple(all[i - 1].kind, all[i - 1].order, all[i - 1].id),
                std::tuple(all[i].kind, all[i].order, all[i].id));
    }
  }
  EXPECT_EQ(Catalog::Find("no-such-id"), nullptr);
}

TEST(Catalog, DescriptionsAgreeWithTheImplementations) {
  for (const core::Rule* rule : core::RuleRegistry::All()) {
    const CatalogEntry* entry = Catalog::Find(rule->Info().id);
    ASSERT_NE(entry, nullptr) << rule->Info().id;
    EXPECT_EQ(entry->kind, FindingKind::Rule);
    EXPECT_EQ(entry->slug, rule->Info().slug);
    EXPECT_EQ(core::LevelName(entry->level), core::LevelName(rule->Info().action));
  }
  const auto checks = probes::CheckRegistry::All();
  const auto check_entries = Catalog::Of(FindingKind::Check);
  ASSERT_EQ(checks.size(), check_entries.size());
  for (std::size_t i = 0; i < checks.size(); ++i) {  // the probe's order is the registry's
    EXPECT_EQ(checks[i]->Id(), check_entries[i].id);
    EXPECT_EQ(checks[i]->Info().slug, check_entries[i].slug);
  }
  const auto diagnoses = controllers::DiagnosisRegistry::All();
  const auto diagnosis_entries = Catalog::Of(FindingKind::Diagnosis);
  ASSERT_EQ(diagnoses.size(), diagnosis_entries.size());
  for (std::size_t i = 0; i < diagnoses.size(); ++i) {  // rank order
    EXPECT_EQ(diagnoses[i]->Info().id, diagnosis_entries[i].id);
    EXPECT_EQ(diagnoses[i]->Info().rank, diagnosis_entries[i].order);
  }
}

TEST(Catalog, LevelsFitTheirKind) {
  const std::set<FindingLevel> rule_levels{FindingLevel::Fix, FindingLevel::Deny,
                                           FindingLevel::Warn};
  const std::set<FindingLevel> check_levels{FindingLevel::Fail, FindingLevel::Warn,
                                            FindingLevel::Info};
  for (const CatalogEntry& entry : Catalog::All()) {
    switch (entry.kind) {
      case FindingKind::Rule:
        EXPECT_TRUE(rule_levels.contains(entry.level)) << entry.id;
        break;
      case FindingKind::Check:
        EXPECT_TRUE(check_levels.contains(entry.level)) << entry.id;
        break;
      case FindingKind::Diagnosis:
        EXPECT_EQ(entry.level, FindingLevel::Warn) << entry.id;
        break;
    }
  }
  EXPECT_EQ(Catalog::Find("gpu-p2p")->level, FindingLevel::Fail);
  EXPECT_EQ(Catalog::Find("removeipc")->level, FindingLevel::Warn);
  EXPECT_EQ(Catalog::Find("nccl-version")->level, FindingLevel::Info);
}

// Refusals throw before anything is stored, so the registry stays as it was.
TEST(Catalog, RefusesDuplicatesUnknownSlugsAndMissingText) {
  const std::size_t before = Catalog::All().size();
  const CatalogEntry good{"catalog-test-new", FindingKind::Check, FindingLevel::Warn,
                          "memlock",          "a summary",        "a remedy"};
  const auto refused = [&](auto change) {
    CatalogEntry entry = good;
    change(entry);
    EXPECT_THROW(Catalog::Register(entry), std::logic_error) << entry.id;
  };
  refused([](CatalogEntry& e) { e.id = "gpu-oom"; });  // a diagnosis: ids are unique across kinds
  refused([](CatalogEntry& e) { e.slug = "no-such-section"; });
  refused([](CatalogEntry& e) { e.summary = ""; });
  refused([](CatalogEntry& e) { e.remedy = ""; });
  refused([](CatalogEntry& e) { e.id = ""; });
  EXPECT_EQ(Catalog::All().size(), before);
  EXPECT_EQ(Catalog::Find("catalog-test-new"), nullptr);
}

}  // namespace
}  // namespace ncclguard::test
