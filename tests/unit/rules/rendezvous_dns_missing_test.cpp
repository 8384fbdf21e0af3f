#include <gtest/gtest.h>

#include "tests/unit/rules/rule_test_util.h"

namespace ncclguard::test {
namespace {

constexpr const char* kRendezvousDnsMissingRule = "rendezvous-dns-missing";

// A compliant pod as Kubeflow's training operator creates it for job "llama".
core::Json KubeflowPod(const std::string& name = "llama-master-0") {
  core::Json pod = CompliantPod();
  pod["metadata"]["name"] = name;
  pod["metadata"]["labels"] = {{"training.kubeflow.org/job-name", "llama"},
                               {"training.kubeflow.org/replica-type", "master"}};
  return pod;
}

TEST(RendezvousDnsMissing, GivesAKubeflowPodTheServiceAsSubdomainAndItsNameAsHostname) {
  const core::Evaluation result = Check(KubeflowPod());
  const auto findings = FindingsOf(result, kRendezvousDnsMissingRule);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].level, core::Level::Fix);
  EXPECT_EQ(findings[0].path, "/spec/subdomain");
  EXPECT_NE(findings[0].message.find("llama-master-0.llama.<namespace>.svc"), std::string::npos)
      << findings[0].message;
  EXPECT_EQ(result.fixed["spec"]["subdomain"], "llama");
  EXPECT_EQ(result.fixed["spec"]["hostname"], "llama-master-0");
  // Fixed once, nothing more to do.
  EXPECT_TRUE(FindingsOf(Check(result.fixed), kRendezvousDnsMissingRule).empty());
}

TEST(RendezvousDnsMissing, KeepsWhatTheUserOrOperatorSet) {
  core::Json pod = KubeflowPod();
  pod["spec"]["hostname"] = "custom";
  const core::Evaluation result = Check(pod);
  EXPECT_EQ(result.fixed["spec"]["subdomain"], "llama");
  EXPECT_EQ(result.fixed["spec"]["hostname"], "custom");

  core::Json with_subdomain = KubeflowPod();
  with_subdomain["spec"]["subdomain"] = "mine";
  EXPECT_TRUE(FindingsOf(Check(with_subdomain), kRendezvousDnsMissingRule).empty());
}

TEST(RendezvousDnsMissing, LeavesOtherPodsAndTemplatesAlone) {
  EXPECT_TRUE(FindingsOf(Check(CompliantPod()), kRendezvousDnsMissingRule).empty());
  const core::Json job = PyTorchJob(2, "p5.48xlarge");
  EXPECT_TRUE(FindingsOf(Check(job), kRendezvousDnsMissingRule).empty());
}

TEST(RendezvousDnsMissing, AJobNameThatIsNoDnsLabelGetsAValidServiceName) {
  core::Json pod = KubeflowPod("llama.v2-master-0");
  pod["metadata"]["labels"]["training.kubeflow.org/job-name"] = "llama.v2";
  const core::Evaluation result = Check(pod);
  const std::string subdomain = result.fixed["spec"]["subdomain"];
  EXPECT_NE(subdomain, "llama.v2");
  EXPECT_EQ(subdomain.find('.'), std::string::npos);
  EXPECT_FALSE(result.fixed["spec"].contains("hostname"));  // the pod name is no DNS label
}

}  // namespace
}  // namespace ncclguard::test
