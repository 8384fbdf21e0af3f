// `ncclguard probe --publish` flags: durations as Kubernetes writes them, and the usage errors a
// DaemonSet author sees (exit 2, before anything talks to the API server).
#include <gtest/gtest.h>

#include <stdexcept>

#include "cli/duration.h"
#include "tests/unit/probes/probe_test_support.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

using namespace std::chrono_literals;
using cli::ParseDuration;

TEST(ProbePublishFlags, DurationsReadLikeKubernetesWritesThem) {
  EXPECT_EQ(ParseDuration("5m", "--interval"), 5min);
  EXPECT_EQ(ParseDuration("90s", "--interval"), 90s);
  EXPECT_EQ(ParseDuration("1h30m", "--interval"), 90min);
  EXPECT_EQ(ParseDuration("500ms", "--interval"), 500ms);
  EXPECT_EQ(ParseDuration("1m30s250ms", "--interval"), 90250ms);
  EXPECT_EQ(ParseDuration("300", "--interval"), 300s) << "a bare number is seconds";
}

TEST(ProbePublishFlags, BadDurationsNameTheFlagAndTheProblem) {
  for (const std::string bad : {"", "5x", "-5m", "m", "5m3", "1.5h", "5 m", "99999999999999999h"}) {
    try {
      ParseDuration(bad, "--interval");
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find("--interval"), std::string::npos) << error.what();
      EXPECT_NE(std::string(error.what()).find("like 30s, 5m"), std::string::npos) << error.what();
    }
  }
}

TEST(ProbePublishFlags, UsageErrorsExitTwoBeforeTouchingTheCluster) {
  const std::string root = FixturePath("p5-32efa");
  const std::string missing_kubeconfig = "/nonexistent/kubeconfig";
  for (const auto& [args, expected] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"probe", "--publish", "--node-name", "n1", "--interval", "soon"}, "--interval soon"},
           {{"probe", "--publish", "--node-name", "n1", "--interval", "0s"}, "longer than 0"},
           {{"probe", "--publish", "--node-name", "n1", "--request-poll", "5parsecs"},
            "--request-poll"},
           {{"probe", "--publish", "--node-name", "n1", "--log-level", "loud"}, "--log-level"},
           {{"probe", "--publish", "--node-name", "n1", "--host-root", "/nonexistent/root"},
            "--host-root"},
           {{"probe", "--publish", "--node-name", "n1", "--host-root", root, "--kubeconfig",
             missing_kubeconfig},
            missing_kubeconfig}}) {
    const auto result = RunCli(args);
    EXPECT_EQ(result.exit_code, 2) << result.err;
    EXPECT_NE(result.err.find("ncclguard probe --publish: "), std::string::npos) << result.err;
    EXPECT_NE(result.err.find(expected), std::string::npos) << result.err;
  }
}

TEST(ProbePublishFlags, AMetricsAddressThatCannotServeIsAUsageError) {
  const std::string root = FixturePath("p5-32efa");
  // Never contacted: the address is refused first.
  const TempFile kubeconfig(R"(apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
)");
  const auto no_port = RunCli({"probe", "--publish", "--node-name", "n1", "--host-root", root,
                               "--kubeconfig", kubeconfig.path(), "--metrics-listen", "127.0.0.1"});
  EXPECT_EQ(no_port.exit_code, 2) << no_port.err;
  EXPECT_NE(no_port.err.find("ncclguard probe --publish: --metrics-listen 127.0.0.1: no port"),
            std::string::npos)
      << no_port.err;

  const auto without_publish =
      RunCli({"probe", "--once", "--host-root", root, "--metrics-listen", ":9402"});
  EXPECT_EQ(without_publish.exit_code, 2) << without_publish.err;
  EXPECT_NE(without_publish.err.find("--metrics-listen needs --publish"), std::string::npos)
      << without_publish.err;
  EXPECT_EQ(without_publish.out, "") << "no checks ran";
}

TEST(ProbePublishFlags, WithoutANodeNameItSaysWhereOneComesFrom) {
  const char* saved = std::getenv("NODE_NAME");
  const std::string saved_value = saved ? saved : "";
  unsetenv("NODE_NAME");
  const auto result = RunCli({"probe", "--publish", "--once"});
  if (saved) setenv("NODE_NAME", saved_value.c_str(), 1);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("--node-name or set NODE_NAME"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace ncclguard::test
