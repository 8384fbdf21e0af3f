#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kMasterAddrUnqualifiedRule = "master-addr-unqualified";

// A two-pod PyTorchJob whose Worker sets MASTER_ADDR.
core::Json TwoPodJob(const std::string& master_addr) {
  core::Json job = PyTorchJob(1);
  SetEnv(job.at(core::JsonPointer("/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0")),
         "MASTER_ADDR", master_addr);
  return job;
}

TEST(MasterAddrUnqualified, WarnsForABareName) {
  const core::Json pod = PodWithEnv("MASTER_ADDR", "master");
  const core::Evaluation result = Check(pod);

  const auto findings = FindingsOf(result, kMasterAddrUnqualifiedRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  const core::Finding& f = findings.front();
  EXPECT_EQ(f.level, core::Level::Warn);
  EXPECT_EQ(f.path, EnvPointer(pod, "MASTER_ADDR"));
  EXPECT_TRUE(
      Mentions(f.message, "container \"pytorch\": MASTER_ADDR=\"master\" is not fully qualified"));
  EXPECT_TRUE(Mentions(f.message, "Use <pod>.<service>.<namespace>.svc.cluster.local"));
  EXPECT_TRUE(LinksTo(f, "dns-rendezvous"));
  EXPECT_FALSE(result.HasDeny());
}

TEST(MasterAddrUnqualified, WarnsForAPartiallyQualifiedName) {
  EXPECT_EQ(
      FindingsOf(CheckPodEnv("MASTER_ADDR", "llama-master-0.llama.ml"), kMasterAddrUnqualifiedRule)
          .size(),
      1u);
}

TEST(MasterAddrUnqualified, AcceptsAFullyQualifiedName) {
  for (const char* value : {"llama-master-0.llama.ml.svc.cluster.local",
                            "llama-master-0.llama.ml.svc.cluster.local."}) {
    EXPECT_TRUE(FindingsOf(CheckPodEnv("MASTER_ADDR", value), kMasterAddrUnqualifiedRule).empty())
        << value;
  }
}

TEST(MasterAddrUnqualified, AcceptsIpAddresses) {
  for (const char* value : {"10.0.12.7", "fd00::1"}) {
    EXPECT_TRUE(FindingsOf(CheckPodEnv("MASTER_ADDR", value), kMasterAddrUnqualifiedRule).empty())
        << value;
  }
}

TEST(MasterAddrUnqualified, SkipsVariableReferences) {
  EXPECT_TRUE(
      FindingsOf(CheckPodEnv("MASTER_ADDR", "$(MASTER_HOST)"), kMasterAddrUnqualifiedRule).empty());
}

TEST(MasterAddrUnqualified, AcceptsLocalhostInASinglePod) {
  EXPECT_TRUE(
      FindingsOf(CheckPodEnv("MASTER_ADDR", "localhost"), kMasterAddrUnqualifiedRule).empty());
}

TEST(MasterAddrUnqualified, WarnsForLocalhostInAMultiPodJob) {
  const core::Json job = TwoPodJob("localhost");
  const core::Evaluation result = Check(job);
  const auto findings = FindingsOf(result, kMasterAddrUnqualifiedRule);
  ASSERT_EQ(findings.size(), 1u) << Dump(result);
  EXPECT_EQ(findings.front().path,
            EnvPointer(job, "MASTER_ADDR",
                       "/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0"));
}

TEST(MasterAddrUnqualified, UsesThePolicyClusterDomain) {
  const core::Policy policy = core::ParsePolicy("clusterDomain: corp.internal");
  EXPECT_TRUE(FindingsOf(CheckPodEnv("MASTER_ADDR", "m-0.llama.ml.svc.corp.internal", policy),
                         kMasterAddrUnqualifiedRule)
                  .empty());
  const auto findings =
      FindingsOf(CheckPodEnv("MASTER_ADDR", "m-0.llama.ml.svc.cluster.local", policy),
                 kMasterAddrUnqualifiedRule);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_TRUE(Mentions(findings.front().message, "<namespace>.svc.corp.internal"));
}

TEST(MasterAddrUnqualified, DoesNotFireOnACompliantPod) {
  EXPECT_TRUE(FindingsOf(Check(CompliantPod()), kMasterAddrUnqualifiedRule).empty());
}

}  // namespace
}  // namespace ncclguard::test
