// `ncclguard controller` refuses unusable configuration with exit 2 and one line saying what is
// wrong, before it contacts any API server.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

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

}  // namespace
}  // namespace ncclguard::test
