#include <gtest/gtest.h>

#include <string>

#include "core/finding.h"
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

TEST(Engine, RegistersEveryRuleOfTheContract) {
  // Ids users, policies and alerts already name (docs/contract.md): rules may be added, not
  // renamed or removed.
  for (const char* id : {"efa-resources-missing",
                         "efa-count-mismatch",
                         "instance-type-unknown",
                         "fi-provider-without-efa",
                         "hostpath-infiniband",
                         "ipc-lock-missing",
                         "efa-env-missing",
                         "socket-ifname-invalid",
                         "collnet-on-efa",
                         "nccl-proto-invalid",
                         "nccl-algo-invalid",
                         "nccl-env-deprecated",
                         "async-error-handling-missing",
                         "dev-shm-missing",
                         "memory-limit-missing",
                         "master-addr-unqualified",
                         "world-size-mismatch",
                         "image-mismatch",
                         "image-unpinned",
                         "mixed-instance-families",
                         "rendezvous-dns-missing",
                         "nccl-debug-missing"}) {
    EXPECT_NE(core::RuleRegistry::Find(id), nullptr) << id;
  }
}

// What a user sees of a registered rule: its row in docs/rules.md and its entry in
// `ncclguard explain --all`, whatever the number of rules.
TEST(Engine, EveryRegisteredRuleIsInTheRulesTableAndInExplainAll) {
  const std::string table = ReadFile(SourcePath("docs/rules.md"));
  const CommandResult all = RunCli({"explain", "--all"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  ASSERT_FALSE(core::RuleRegistry::All().empty());
  for (const core::Rule* rule : core::RuleRegistry::All()) {
    const std::string id(rule->Info().id);
    const std::string row = "| `" + id + "` | " + std::string(core::LevelName(rule->Info().action));
    EXPECT_NE(table.find(row + " |"), std::string::npos)
        << id << " has no row in docs/rules.md: run scripts/gen-docs.sh";
    EXPECT_NE(all.out.find("\n" + id + "\n  kind:   rule"), std::string::npos)
        << id << " is missing from `ncclguard explain --all`";
  }
}

}  // namespace
}  // namespace ncclguard::test
