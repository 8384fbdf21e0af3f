// `ncclguard controller` refuses unusable configuration with exit 2 and one line saying what is
// wrong, before it contacts any API server; --print-rbac prints the rules its flags need.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/json.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

TEST(CliController, UnusableKubeconfigsExitTwoNamingTheFile) {
  auto r = RunCli({"controller", "--kubeconfig", "/nonexistent/kubeconfig"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/nonexistent/kubeconfig"), std::string::npos) << r.err;

  TempFile torn("clusters: [oops\n");
  r = RunCli({"controller", "--kubeconfig", torn.path()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(torn.path() + ": not valid YAML"), std::string::npos) << r.err;

  TempFile no_context("apiVersion: v1\nkind: Config\nclusters: []\n");
  r = RunCli({"controller", "--kubeconfig", no_context.path()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("current-context"), std::string::npos) << r.err;
}

TEST(CliController, BadFlagsAndPoliciesExitTwo) {
  auto r = RunCli({"controller", "--tls-cert-file", "/tmp/tls.crt"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--tls-cert-file and --tls-key-file go together"), std::string::npos)
      << r.err;
  EXPECT_EQ(RunCli({"controller", "--workers", "0"}).exit_code, 2);
  EXPECT_EQ(RunCli({"controller", "--leader-elect=maybe"}).exit_code, 2);

  TempFile policy("rules: {nope: {enabled: false}}\n");
  r = RunCli({"controller", "--policy", policy.path(), "--kubeconfig", "/nonexistent/kubeconfig"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("spec.rules.nope"), std::string::npos) << r.err;
}

TEST(CliController, CertificateModesExcludeEachOther) {
  auto r = RunCli({"controller", "--webhook-cert-secret", "ncclguard-webhook-certs",
                   "--tls-cert-file", "/tmp/tls.crt", "--tls-key-file", "/tmp/tls.key",
                   "--kubeconfig", "/nonexistent/kubeconfig"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--webhook-cert-secret (self-managed certificates) and "
                       "--tls-cert-file/--tls-key-file"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("choose one"), std::string::npos) << r.err;
}

TEST(CliController, BadSelfManagedCertificateFlagsExitTwo) {
  auto r = RunCli({"controller", "--webhook-cert-secret", "certs", "--webhook-host", "a,DNS:evil",
                   "--kubeconfig", "/nonexistent/kubeconfig"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--webhook-host: host 'a,DNS:evil': not a DNS name or IP address"),
            std::string::npos)
      << r.err;
  r = RunCli({"controller", "--webhook-cert-secret", "certs", "--webhook-service", "",
              "--kubeconfig", "/nonexistent/kubeconfig"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--webhook-service must not be empty"), std::string::npos) << r.err;
}

// Whether any rule in `rules` (a list of PolicyRules) is on `resource` of `group`, and, when
// `name` is given, limited to that name.
bool HasRule(const core::Json& rules, const std::string& group, const std::string& resource,
             const std::string& name = "") {
  for (const core::Json& rule : rules) {
    const auto has = [](const core::Json& list, const std::string& value) {
      return std::find(list.begin(), list.end(), value) != list.end();
    };
    if (!has(rule["apiGroups"], group) || !has(rule["resources"], resource)) continue;
    if (name.empty() || (rule.contains("resourceNames") && has(rule["resourceNames"], name))) {
      return true;
    }
  }
  return false;
}

bool HasRuleInGroup(const core::Json& rbac, const std::string& group) {
  for (const char* scope : {"clusterRules", "namespaceRules"}) {
    for (const core::Json& rule : rbac[scope]) {
      const core::Json& groups = rule["apiGroups"];
      if (std::find(groups.begin(), groups.end(), group) != groups.end()) return true;
    }
  }
  return false;
}

core::Json PrintedRbac(std::vector<std::string> flags) {
  std::vector<std::string> args = {"controller", "--print-rbac"};
  args.insert(args.end(), flags.begin(), flags.end());
  const CommandResult r = RunCli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return core::Json::parse(r.out);
}

TEST(CliController, PrintRbacFollowsTheFlags) {
  const core::Json plain = PrintedRbac({});
  EXPECT_TRUE(HasRule(plain["clusterRules"], "kubeflow.org", "pytorchjobs")) << plain.dump(2);
  EXPECT_TRUE(HasRule(plain["namespaceRules"], "coordination.k8s.io", "leases")) << plain.dump(2);
  EXPECT_FALSE(HasRuleInGroup(plain, "kueue.x-k8s.io")) << plain.dump(2);
  EXPECT_FALSE(HasRule(plain["namespaceRules"], "", "secrets")) << plain.dump(2);

  const core::Json kueue = PrintedRbac({"--kueue-admission-check"});
  EXPECT_TRUE(HasRule(kueue["clusterRules"], "kueue.x-k8s.io", "workloads")) << kueue.dump(2);
  EXPECT_FALSE(HasRuleInGroup(PrintedRbac({"--kueue-admission-check=false"}), "kueue.x-k8s.io"));
  // Topology-aware placement reads the queues, flavors and Topologies, and writes nothing.
  const core::Json topology = PrintedRbac({"--kueue-topology"});
  for (const char* resource : {"localqueues", "clusterqueues", "resourceflavors", "topologies"}) {
    EXPECT_TRUE(HasRule(topology["clusterRules"], "kueue.x-k8s.io", resource)) << resource;
  }
  EXPECT_FALSE(HasRule(topology["clusterRules"], "kueue.x-k8s.io", "workloads"))
      << topology.dump(2);

  // The background audit is on unless turned off.
  EXPECT_TRUE(HasRule(plain["clusterRules"], "wgpolicyk8s.io", "policyreports")) << plain.dump(2);
  EXPECT_FALSE(HasRuleInGroup(PrintedRbac({"--policy-reports=false"}), "wgpolicyk8s.io"));

  const core::Json certs = PrintedRbac({"--webhook-cert-secret=s"});
  EXPECT_TRUE(HasRule(certs["namespaceRules"], "", "secrets", "s")) << certs.dump(2);

  const core::Json alone = PrintedRbac({"--leader-elect=false"});
  EXPECT_FALSE(HasRule(alone["namespaceRules"], "coordination.k8s.io", "leases")) << alone.dump(2);

  const core::Json owned = PrintedRbac({"--owner-service-account=ncclguard"});
  EXPECT_TRUE(HasRule(owned["namespaceRules"], "", "serviceaccounts", "ncclguard"))
      << owned.dump(2);
}

// What the chart passes: certificate files that do not exist here, and no cluster to reach.
TEST(CliController, PrintRbacReadsNoFilesAndContactsNothing) {
  const CommandResult r =
      RunCli({"controller", "--print-rbac", "--kubeconfig", "/nonexistent/kubeconfig",
              "--tls-cert-file=/nonexistent/tls.crt", "--tls-key-file=/nonexistent/tls.key"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(core::Json::parse(r.out).contains("clusterRules")) << r.out;
}

}  // namespace
}  // namespace ncclguard::test
