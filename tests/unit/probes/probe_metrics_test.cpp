// The probe's metrics: what a scrape shows after each run (only that run's statuses, durations,
// the node and its instance type, when it finished), publishing attempts by result, and the
// tests between nodes (by tier, pass and result, their durations, the last round and this node's
// standing).
#include "probes/metrics.h"

#include <gtest/gtest.h>

#include <string>

#include "metrics/registry.h"

namespace ncclguard::probes {
namespace {

using namespace std::chrono_literals;

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

// Whether any line of `text` starts with `prefix`.
bool HasSeriesStarting(const std::string& text, const std::string& prefix) {
  return text.starts_with(prefix) || text.find("\n" + prefix) != std::string::npos;
}

CheckResult Checked(const std::string& id, CheckStatus status, std::chrono::nanoseconds took) {
  CheckResult result = Result(status, "", "", "");
  result.id = id;
  result.duration = took;
  return result;
}

ProbeReport Report(std::vector<CheckResult> checks, const std::string& instance_type = "") {
  ProbeReport report;
  report.node_name = "ip-10-0-0-1";
  report.instance_type = instance_type;
  report.checks = std::move(checks);
  report.summary = Summarize(report.checks);
  return report;
}

const std::chrono::system_clock::time_point kFinished{std::chrono::seconds(1800000000)};

TEST(ProbeMetrics, EachCheckHasItsStatusAndDuration) {
  prometheus::Registry registry;
  ProbeMetrics metrics(registry);
  metrics.RecordRun(Report({Checked("efa-device-count", CheckStatus::Fail, 250ms),
                            Checked("memlock-limit", CheckStatus::Pass, 1500ms),
                            Checked("pci-acs", CheckStatus::Warn, 2ms),
                            Checked("gpu-count", CheckStatus::Skip, 0ms)},
                           "p5.48xlarge"),
                    kFinished);
  const std::string text = metrics::Render(registry);
  const std::string status = "ncclguard_probe_check_status";
  EXPECT_TRUE(Has(text, status + R"({check="efa-device-count",status="Fail"} 1)")) << text;
  EXPECT_TRUE(Has(text, status + R"({check="memlock-limit",status="Pass"} 1)")) << text;
  EXPECT_TRUE(Has(text, status + R"({check="pci-acs",status="Warn"} 1)")) << text;
  EXPECT_TRUE(Has(text, status + R"({check="gpu-count",status="Skip"} 1)")) << text;
  EXPECT_TRUE(Has(text, "# TYPE " + status + " gauge")) << text;
  const std::string duration = "ncclguard_probe_check_duration_seconds";
  EXPECT_TRUE(Has(text, duration + R"({check="efa-device-count"} 0.25)")) << text;
  EXPECT_TRUE(Has(text, duration + R"({check="memlock-limit"} 1.5)")) << text;
  EXPECT_TRUE(Has(text, duration + R"({check="pci-acs"} 0.002)")) << text;
  EXPECT_TRUE(Has(text, duration + R"({check="gpu-count"} 0)")) << text;
  EXPECT_TRUE(
      Has(text, R"(ncclguard_probe_node_info{instance_type="p5.48xlarge",node="ip-10-0-0-1"} 1)"))
      << text;
  EXPECT_TRUE(Has(text, "ncclguard_probe_last_run_timestamp_seconds 1800000000")) << text;
}

TEST(ProbeMetrics, AChangedStatusReplacesTheSeriesOfTheFormerOne) {
  prometheus::Registry registry;
  ProbeMetrics metrics(registry);
  metrics.RecordRun(Report({Checked("efa-device-count", CheckStatus::Pass, 10ms),
                            Checked("pci-acs", CheckStatus::Warn, 10ms)}),
                    kFinished);
  metrics.RecordRun(Report({Checked("efa-device-count", CheckStatus::Fail, 30ms),
                            Checked("pci-acs", CheckStatus::Warn, 20ms)}),
                    kFinished + 300s);
  const std::string text = metrics::Render(registry);
  const std::string status = "ncclguard_probe_check_status";
  EXPECT_TRUE(Has(text, status + R"({check="efa-device-count",status="Fail"} 1)")) << text;
  EXPECT_FALSE(HasSeriesStarting(text, status + R"({check="efa-device-count",status="Pass"})"))
      << text;
  EXPECT_TRUE(Has(text, status + R"({check="pci-acs",status="Warn"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(ncclguard_probe_check_duration_seconds{check="efa-device-count"} 0.03)"))
      << "the last run's duration, not the first's: " << text;
  EXPECT_TRUE(Has(text, R"(ncclguard_probe_check_duration_seconds{check="pci-acs"} 0.02)")) << text;
  EXPECT_TRUE(Has(text, "ncclguard_probe_last_run_timestamp_seconds 1800000300")) << text;
}

TEST(ProbeMetrics, ACheckNoLongerRunAndAFormerInstanceTypeLeaveNoSeries) {
  prometheus::Registry registry;
  ProbeMetrics metrics(registry);
  metrics.RecordRun(Report({Checked("efa-device-count", CheckStatus::Fail, 10ms),
                            Checked("gpu-count", CheckStatus::Pass, 10ms)}),
                    kFinished);
  // The instance type was resolved later (the Node's label), and gpu-count is not run any more.
  metrics.RecordRun(Report({Checked("efa-device-count", CheckStatus::Pass, 10ms)}, "p5.48xlarge"),
                    kFinished);
  const std::string text = metrics::Render(registry);
  EXPECT_FALSE(HasSeriesStarting(text, R"(ncclguard_probe_check_status{check="gpu-count")"))
      << text;
  EXPECT_FALSE(
      HasSeriesStarting(text, R"(ncclguard_probe_check_duration_seconds{check="gpu-count")"))
      << text;
  EXPECT_TRUE(
      Has(text, R"(ncclguard_probe_node_info{instance_type="p5.48xlarge",node="ip-10-0-0-1"} 1)"))
      << text;
  EXPECT_FALSE(HasSeriesStarting(text, R"(ncclguard_probe_node_info{instance_type="",)")) << text;
}

TEST(ProbeMetrics, PublishingAttemptsAreCountedByResult) {
  prometheus::Registry registry;
  ProbeMetrics metrics(registry);
  // Both series exist before the first attempt (a rate over them starts at 0).
  std::string text = metrics::Render(registry);
  EXPECT_TRUE(Has(text, R"(ncclguard_probe_runs_total{result="published"} 0)")) << text;
  EXPECT_TRUE(Has(text, R"(ncclguard_probe_runs_total{result="failed"} 0)")) << text;
  metrics.CountPublication(false);
  metrics.CountPublication(false);
  metrics.CountPublication(false);
  metrics.CountPublication(true);
  metrics.CountPublication(true);
  text = metrics::Render(registry);
  EXPECT_TRUE(Has(text, R"(ncclguard_probe_runs_total{result="published"} 2)")) << text;
  EXPECT_TRUE(Has(text, R"(ncclguard_probe_runs_total{result="failed"} 3)")) << text;
  EXPECT_TRUE(Has(text, "# TYPE ncclguard_probe_runs_total counter")) << text;
}

TEST(ProbeMetrics, PeerTestsAreCountedByTierPassAndResultFromZero) {
  prometheus::Registry registry;
  ProbeMetrics metrics(registry);
  const std::string tests = "ncclguard_probe_peer_tests_total";
  std::string text = metrics::Render(registry);
  // Every tier, pass and result from 0 (a first failure is an increase rate() sees).
  for (const char* tier : {"tcp", "fabric"}) {
    for (const char* pass : {"ring", "culprit"}) {
      for (const char* result : {"passed", "failed"}) {
        EXPECT_TRUE(Has(text, tests + "{pass=\"" + pass + "\",result=\"" + result + "\",tier=\"" +
                                  tier + "\"} 0"))
            << tier << " " << pass << " " << result << "\n"
            << text;
      }
    }
  }
  metrics.RecordPeerTest("tcp", "ring", true, 0.0012);
  metrics.RecordPeerTest("tcp", "ring", true, 0.0018);
  metrics.RecordPeerTest("tcp", "ring", false, 2.0);
  metrics.RecordPeerTest("fabric", "culprit", false, 2.0);
  metrics.RecordPeerTest("fabric", "ring", true, 0.004);
  text = metrics::Render(registry);
  EXPECT_TRUE(Has(text, tests + R"({pass="ring",result="passed",tier="tcp"} 2)")) << text;
  EXPECT_TRUE(Has(text, tests + R"({pass="ring",result="failed",tier="tcp"} 1)")) << text;
  EXPECT_TRUE(Has(text, tests + R"({pass="culprit",result="failed",tier="fabric"} 1)")) << text;
  EXPECT_TRUE(Has(text, tests + R"({pass="ring",result="passed",tier="fabric"} 1)")) << text;
  EXPECT_TRUE(Has(text, tests + R"({pass="culprit",result="passed",tier="tcp"} 0)")) << text;
  EXPECT_TRUE(Has(text, "# TYPE " + tests + " counter")) << text;
}

TEST(ProbeMetrics, PeerTestDurationsFillBucketsFromAMillisecondToFiveSeconds) {
  prometheus::Registry registry;
  ProbeMetrics metrics(registry);
  metrics.RecordPeerTest("tcp", "ring", true, 0.0008);
  metrics.RecordPeerTest("tcp", "ring", true, 0.002);
  metrics.RecordPeerTest("tcp", "culprit", false, 2.0);  // timed out at the default --timeout
  metrics.RecordPeerTest("fabric", "ring", true, 0.03);
  const std::string text = metrics::Render(registry);
  const std::string duration = "ncclguard_probe_peer_test_duration_seconds";
  EXPECT_TRUE(Has(text, "# TYPE " + duration + " histogram")) << text;
  EXPECT_TRUE(Has(text, duration + R"(_bucket{tier="tcp",le="0.001"} 1)")) << text;
  EXPECT_TRUE(Has(text, duration + R"(_bucket{tier="tcp",le="0.0025"} 2)")) << text;
  EXPECT_TRUE(Has(text, duration + R"(_bucket{tier="tcp",le="1"} 2)")) << text;
  EXPECT_TRUE(Has(text, duration + R"(_bucket{tier="tcp",le="2.5"} 3)")) << text;
  EXPECT_TRUE(Has(text, duration + R"(_bucket{tier="tcp",le="5"} 3)")) << text;
  EXPECT_TRUE(Has(text, duration + R"(_bucket{tier="tcp",le="+Inf"} 3)")) << text;
  EXPECT_TRUE(Has(text, duration + R"(_count{tier="tcp"} 3)")) << text;
  EXPECT_TRUE(Has(text, duration + R"(_bucket{tier="fabric",le="0.025"} 0)")) << text;
  EXPECT_TRUE(Has(text, duration + R"(_bucket{tier="fabric",le="0.05"} 1)")) << text;
  EXPECT_TRUE(Has(text, duration + R"(_count{tier="fabric"} 1)")) << text;
  EXPECT_EQ(ProbeMetrics::PeerTestBuckets().front(), 0.001);
  EXPECT_EQ(ProbeMetrics::PeerTestBuckets().back(), 5);
}

TEST(ProbeMetrics, APeerRoundShowsItsDurationTimeAndOnlyTheCurrentStanding) {
  prometheus::Registry registry;
  ProbeMetrics metrics(registry);
  const std::string standing = "ncclguard_probe_peer_standing";
  // No standing before the first round.
  EXPECT_FALSE(HasSeriesStarting(metrics::Render(registry), standing + "{")) << "before a round";

  metrics.RecordPeerRound(1.25, kFinished, "reachable");
  std::string text = metrics::Render(registry);
  EXPECT_TRUE(Has(text, standing + R"({standing="reachable"} 1)")) << text;
  EXPECT_TRUE(Has(text, "ncclguard_probe_peer_round_duration_seconds 1.25")) << text;
  EXPECT_TRUE(Has(text, "ncclguard_probe_peer_last_round_timestamp_seconds 1800000000")) << text;
  EXPECT_TRUE(Has(text, "# TYPE " + standing + " gauge")) << text;

  metrics.RecordPeerRound(4.5, kFinished + 300s, "unreachable");
  metrics.RecordPeerRound(4, kFinished + 600s, "unreachable");
  text = metrics::Render(registry);
  EXPECT_TRUE(Has(text, standing + R"({standing="unreachable"} 1)")) << text;
  EXPECT_FALSE(HasSeriesStarting(text, standing + R"({standing="reachable"})"))
      << "the former standing's series is removed: " << text;
  EXPECT_TRUE(Has(text, "ncclguard_probe_peer_round_duration_seconds 4")) << "the last round's";
  EXPECT_TRUE(Has(text, "ncclguard_probe_peer_last_round_timestamp_seconds 1800000600")) << text;

  metrics.RecordPeerRound(0.5, kFinished + 900s, "reachable");
  text = metrics::Render(registry);
  EXPECT_TRUE(Has(text, standing + R"({standing="reachable"} 1)")) << text;
  EXPECT_FALSE(HasSeriesStarting(text, standing + R"({standing="unreachable"})")) << text;
}

}  // namespace
}  // namespace ncclguard::probes
