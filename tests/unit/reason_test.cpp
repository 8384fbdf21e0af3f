// Condition and Event reasons (core/reason.h): every id ncclguard reports becomes a reason that a
// metav1.Condition schema accepts, spelled with the acronyms users know.
#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "controllers/diagnosis.h"
#include "core/reason.h"
#include "core/rule.h"

namespace ncclguard::test {
namespace {

using core::IsValidReason;
using core::ReasonFromId;

// The pattern of metav1.Condition's reason (k8s.io/apimachinery, types.go), as the API server
// checks it.
bool MatchesMetav1Pattern(const std::string& reason) {
  static const std::regex pattern("^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$");
  return reason.size() <= 1024 && std::regex_match(reason, pattern);
}

TEST(Reason, KebabIdsBecomeUpperCamelCaseWithAcronyms) {
  EXPECT_EQ(ReasonFromId("insufficient-validated-nodes"), "InsufficientValidatedNodes");
  EXPECT_EQ(ReasonFromId("container-oom-killed"), "ContainerOOMKilled");
  EXPECT_EQ(ReasonFromId("efa-unschedulable"), "EFAUnschedulable");
  EXPECT_EQ(ReasonFromId("nccl-watchdog-timeout"), "NCCLWatchdogTimeout");
  EXPECT_EQ(ReasonFromId("gpu-oom"), "GPUOOM");
  EXPECT_EQ(ReasonFromId("segfault"), "Segfault");
  EXPECT_EQ(ReasonFromId("gpudirect-rdma"), "GPUDirectRDMA");
  EXPECT_EQ(ReasonFromId("nvlink-status"), "NVLinkStatus");
}

TEST(Reason, EdgeCasesStillYieldValidReasons) {
  EXPECT_EQ(ReasonFromId(""), "Unknown");
  EXPECT_EQ(ReasonFromId("---"), "Unknown");
  EXPECT_EQ(ReasonFromId("9lives"), "R9lives");
  EXPECT_EQ(ReasonFromId("a--b"), "AB");
  EXPECT_EQ(ReasonFromId(std::string(2000, 'x')).size(), 1024u);
}

TEST(Reason, ValidityIsTheMetav1Pattern) {
  for (const char* valid : {"A", "InsufficientValidatedNodes", "a_", "X:y,z_1"}) {
    EXPECT_TRUE(IsValidReason(valid)) << valid;
  }
  for (const char* invalid : {"", "insufficient-validated-nodes", "9lives", "A,", "A:", "A b"}) {
    EXPECT_FALSE(IsValidReason(invalid)) << invalid;
  }
  EXPECT_FALSE(IsValidReason(std::string(1025, 'A')));
}

// Every registered id yields a valid reason, and no two ids share one (the reason alone names the
// diagnosis in `kubectl get events`).
TEST(Reason, EveryRegisteredIdYieldsADistinctValidReason) {
  std::vector<std::string_view> diagnoses;
  for (const controllers::Diagnosis* d : controllers::DiagnosisRegistry::All()) {
    diagnoses.push_back(d->Info().id);
  }
  std::vector<std::string_view> rules;
  for (const core::Rule* rule : core::RuleRegistry::All()) rules.push_back(rule->Info().id);
  for (const auto& ids : {diagnoses, rules}) {
    EXPECT_FALSE(ids.empty());
    std::set<std::string> reasons;
    for (std::string_view id : ids) {
      const std::string reason = ReasonFromId(id);
      EXPECT_TRUE(MatchesMetav1Pattern(reason)) << id << " -> " << reason;
      EXPECT_TRUE(reasons.insert(reason).second) << id << " -> " << reason << " twice";
    }
  }
}

// Over seeded random strings (ASCII, punctuation, bytes of UTF-8): the reason always matches the
// pattern, and IsValidReason agrees with the pattern.
TEST(Reason, PropertyAnyInputYieldsAValidReason) {
  std::mt19937 rng(20261203);
  const std::string alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIZ0123456789-_,:. /\xc3\xa9\x01";
  std::uniform_int_distribution<std::size_t> length(0, 40);
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  for (int round = 0; round < 5000; ++round) {
    std::string input;
    for (std::size_t n = length(rng); n > 0; --n) input += alphabet[pick(rng)];
    const std::string reason = ReasonFromId(input);
    ASSERT_TRUE(MatchesMetav1Pattern(reason)) << '"' << input << "\" -> " << reason;
    ASSERT_TRUE(IsValidReason(reason)) << reason;
    ASSERT_EQ(IsValidReason(input), MatchesMetav1Pattern(input)) << '"' << input << '"';
  }
}

}  // namespace
}  // namespace ncclguard::test
