#include <gtest/gtest.h>

#include "core/rule.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

TEST(Engine, CompliantPodHasNoFindingsAndNoPatch) {
  const core::Evaluation result = Check(CompliantPod());
  EXPECT_TRUE(result.recognized);
  for (const auto& f : result.findings) ADD_FAILURE() << f.rule << ": " << f.message;
  EXPECT_TRUE(result.patch.empty()) << result.patch.dump(2);
  EXPECT_EQ(result.fixed, CompliantPod());
}

TEST(Engine, RegistersEveryRuleOfTheContract) { EXPECT_EQ(core::RuleRegistry::All().size(), 20u); }

}  // namespace
}  // namespace ncclguard::test
