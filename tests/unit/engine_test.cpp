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

TEST(Engine, RegistersEveryRuleOfTheContract) {
  // The 20 original rules of docs/rules.md plus rendezvous-dns-missing and nccl-debug-missing
  // (added rules are allowed,
  // renames not).
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
                         "mixed-instance-families"}) {
    EXPECT_NE(core::RuleRegistry::Find(id), nullptr) << id;
  }
  EXPECT_EQ(core::RuleRegistry::All().size(), 22u);
}

}  // namespace
}  // namespace ncclguard::test
