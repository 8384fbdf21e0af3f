// The host checks over the fixture trees of tests/fixtures/probe (see make_fixtures.py): what an
// admin reads in the NodeValidation for each kind of node.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "core/catalog.h"
#include "probes/check.h"
#include "probes/instance_type.h"
#include "tests/unit/probes/probe_test_support.h"

namespace ncclguard::test {
namespace {

using probes::CheckStatus;

std::shared_ptr<FakeFactSources> P5Sources(int efa_domains) {
  auto sources = std::make_shared<FakeFactSources>();
  sources->fabric = EfaFabric(efa_domains);
  sources->gpu = HealthyGpus();
  return sources;
}

TEST(FixtureP5, HealthyP5PassesEveryCheckItCanRun) {
  const auto report = RunFixture({"p5-32efa", "p5.48xlarge"}, P5Sources(32));
  ASSERT_EQ(report.checks.size(), core::Catalog::Of(core::FindingKind::Check).size());
  for (const auto& result : report.checks) {
    // host-firewall: a fixture tree has no network namespace to enter (proc/1/ns/net).
    if (result.id == "nccl-version" || result.id == "host-firewall") {
      EXPECT_EQ(result.status, CheckStatus::Skip) << result.id << ": " << result.message;
      continue;
    }
    EXPECT_EQ(result.status, CheckStatus::Pass) << result.id << ": " << result.message;
  }
  EXPECT_EQ(report.summary, CheckStatus::Pass);
  EXPECT_EQ(probes::ExitCode(report), 0);
  EXPECT_TRUE(Contains(ResultOf(report, "host-firewall").message,
                       "proc/1/ns/net: No such file or directory (the host's /proc is not under "
                       "the host root)"))
      << ResultOf(report, "host-firewall").message;
  EXPECT_EQ(ResultOf(report, "efa-device-count").observed,
            "sysfs 32, /dev/infiniband uverbs 32, libfabric efa 32");
  EXPECT_EQ(ResultOf(report, "efa-device-count").expected, "32 (p5.48xlarge)");
  EXPECT_EQ(ResultOf(report, "pci-acs").observed, "4 bridges above 8 GPUs and 32 EFA devices");
  EXPECT_EQ(ResultOf(report, "memlock-limit").observed,
            "soft unlimited, hard unlimited (/proc/self/limits)");
  EXPECT_TRUE(Contains(ResultOf(report, "gpudirect-rdma").observed, "nvidia_peermem loaded"));
}

TEST(FixtureP5, ThirtyOfThirtyTwoEfaDevicesFails) {
  const auto report = RunFixture({"p5-30efa", "p5.48xlarge"}, P5Sources(30));
  const auto& result = ResultOf(report, "efa-device-count");
  EXPECT_EQ(result.status, CheckStatus::Fail);
  EXPECT_EQ(result.observed, "sysfs 30, /dev/infiniband uverbs 30, libfabric efa 30");
  EXPECT_TRUE(Contains(result.message, "30 of 32 EFA devices")) << result.message;
  EXPECT_EQ(result.guide,
            "https://github.com/ncclguard/ncclguard/blob/main/docs/guide.md#efa-config");
  EXPECT_EQ(report.summary, CheckStatus::Fail);
  EXPECT_EQ(probes::ExitCode(report), 1);
}

TEST(FixtureP5, LibfabricSeeingFewerDevicesThanSysfsFails) {
  const auto report = RunFixture({"p5-32efa", "p5.48xlarge"}, P5Sources(31));
  const auto& result = ResultOf(report, "efa-device-count");
  EXPECT_EQ(result.status, CheckStatus::Fail);
  EXPECT_TRUE(Contains(result.message, "opens 31 of 32")) << result.message;
}

TEST(FixtureP5, MissingEfaProviderFailsOnAnEfaInstanceType) {
  auto sources = P5Sources(0);
  sources->fabric.provider_found = false;
  sources->fabric.error = "fi_getinfo(provider efa): No data available";
  const auto report = RunFixture({"p5-32efa", "p5.48xlarge"}, sources);
  const auto& provider = ResultOf(report, "efa-provider");
  EXPECT_EQ(provider.status, CheckStatus::Fail);
  EXPECT_TRUE(Contains(provider.message, "fall back to TCP sockets"));
  EXPECT_TRUE(Contains(provider.guide, "#efa-tcp-fallback"));
  EXPECT_EQ(ResultOf(report, "gpudirect-rdma").status, CheckStatus::Skip);
}

TEST(FixtureP5, EfaProviderWithoutHmemFailsGpudirectRdma) {
  auto sources = P5Sources(32);
  sources->fabric.hmem_domains.clear();
  const auto report = RunFixture({"p5-32efa", "p5.48xlarge"}, sources);
  const auto& result = ResultOf(report, "gpudirect-rdma");
  EXPECT_EQ(result.status, CheckStatus::Fail);
  EXPECT_TRUE(Contains(result.observed, "0 of 32 efa domains offer FI_HMEM")) << result.observed;
}

TEST(FixtureP5, UnknownInstanceTypeSkipsTheCatalogComparisonsButStillObserves) {
  const auto report = RunFixture({"p5-32efa", std::nullopt}, P5Sources(32));
  const auto& count = ResultOf(report, "efa-device-count");
  EXPECT_EQ(count.status, CheckStatus::Skip);
  EXPECT_TRUE(Contains(count.message, "instance type unknown")) << count.message;
  EXPECT_TRUE(Contains(count.observed, "sysfs 32"));
  EXPECT_EQ(ResultOf(report, "gpu-count").status, CheckStatus::Skip);
  EXPECT_EQ(ResultOf(report, "gpudirect-rdma").status, CheckStatus::Skip);
}

TEST(FixtureP5, AHyperPodNodeNamedMlIsSizedFromTheCatalog) {
  const auto report = RunFixture({"p5-32efa", "ml.p5.48xlarge"}, P5Sources(32));
  const auto& count = ResultOf(report, "efa-device-count");
  EXPECT_EQ(count.status, CheckStatus::Pass) << count.message;
  EXPECT_EQ(count.expected, "32 (p5.48xlarge)");
  EXPECT_TRUE(probes::LooksLikeInstanceType("ml.p5.48xlarge"));
}

TEST(FixtureP5, InstanceTypeOutsideTheCatalogSaysSo) {
  const auto report = RunFixture({"p5-32efa", "x9.48xlarge"}, P5Sources(32));
  EXPECT_TRUE(Contains(ResultOf(report, "efa-device-count").message,
                       "x9.48xlarge is not in the instance catalog"));
}

TEST(FixtureAcs, RedirectingBridgeFailsWithTheSetpciCommand) {
  const auto report =
      RunFixture({"acs-enabled", std::nullopt}, std::make_shared<FakeFactSources>());
  const auto& result = ResultOf(report, "pci-acs");
  EXPECT_EQ(result.status, CheckStatus::Fail);
  EXPECT_TRUE(Contains(result.observed, "2 bridges above 2 GPUs and 1 EFA devices"));
  EXPECT_TRUE(Contains(result.observed, "0000:01:00.0 [SrcValid+ TransBlk- ReqRedir+ CmpltRedir+"));
  // Only the bridge that redirects; its parent's ACS is on without redirect.
  EXPECT_EQ(result.suggested_command, "setpci -s 0000:01:00.0 ECAP_ACS+0x6.w=0000");
  EXPECT_TRUE(Contains(result.blast_radius, "clears all ACS controls on that bridge"));
  EXPECT_TRUE(Contains(result.guide, "#gpu-p2p"));
}

// The segments are as old as the checkout; the probe's clock is set relative to them.
std::chrono::system_clock::time_point NewestSegmentWrite() {
  std::chrono::system_clock::time_point newest{};
  for (const char* name : {"nccl-AbC123", "nccl-XyZ789"}) {
    const auto written = std::filesystem::last_write_time(FixturePath("stale-shm/dev/shm/") + name);
    newest = std::max(newest, std::chrono::file_clock::to_sys(written));
  }
  return newest;
}

TEST(FixtureShm, SegmentsOlderThanAnHourWarnWithTheCleanupCommand) {
  auto sources = std::make_shared<FakeFactSources>();
  sources->now = NewestSegmentWrite() + std::chrono::hours(2);
  const auto report = RunFixture({"stale-shm", std::nullopt}, sources);
  const auto& result = ResultOf(report, "dev-shm-stale");
  EXPECT_EQ(result.status, CheckStatus::Warn);
  EXPECT_EQ(result.observed,
            "64.0 GiB /dev/shm, 6% used; 2 nccl-* segments, 2 older than 60 min (5.0 KiB)");
  EXPECT_EQ(result.suggested_command,
            "find /dev/shm -maxdepth 1 -name 'nccl-*' -mmin +60 -print -delete");
  EXPECT_FALSE(result.blast_radius.empty());
}

TEST(FixtureShm, FreshSegmentsAreInUseNotStale) {
  auto sources = std::make_shared<FakeFactSources>();
  sources->now = NewestSegmentWrite() + std::chrono::minutes(10);
  const auto report = RunFixture({"stale-shm", std::nullopt}, sources);
  const auto& result = ResultOf(report, "dev-shm-stale");
  EXPECT_EQ(result.status, CheckStatus::Pass) << result.observed;
  EXPECT_TRUE(result.suggested_command.empty());
}

TEST(FixtureShm, NearlyFullShmFails) {
  auto sources = std::make_shared<FakeFactSources>();
  sources->usage = probes::FileSystemUsage{100 << 20, 5 << 20};
  const auto report = RunFixture({"stale-shm", std::nullopt}, sources);
  const auto& result = ResultOf(report, "dev-shm-stale");
  EXPECT_EQ(result.status, CheckStatus::Fail);
  EXPECT_TRUE(Contains(result.observed, "100.0 MiB /dev/shm, 95% used"));
  EXPECT_EQ(report.summary, CheckStatus::Fail);
}

TEST(FixtureRemoveIpc, RemoveIpcYesWarnsWithTheLogindFix) {
  const auto report =
      RunFixture({"removeipc-yes", std::nullopt}, std::make_shared<FakeFactSources>());
  const auto& result = ResultOf(report, "removeipc");
  EXPECT_EQ(result.status, CheckStatus::Warn);
  EXPECT_EQ(result.observed, "RemoveIPC=yes (/etc/systemd/logind.conf)");
  EXPECT_TRUE(Contains(result.suggested_command, "RemoveIPC=no"));
  EXPECT_TRUE(Contains(result.suggested_command, "systemctl restart systemd-logind"));
  EXPECT_TRUE(Contains(result.guide, "#stale-shm"));
}

TEST(FixtureRemoveIpc, RemoveIpcNoPasses) {
  const auto report = RunFixture({"p5-32efa", "p5.48xlarge"}, P5Sources(32));
  EXPECT_EQ(ResultOf(report, "removeipc").status, CheckStatus::Pass);
  EXPECT_EQ(ResultOf(report, "removeipc").observed, "RemoveIPC=no (/etc/systemd/logind.conf)");
}

TEST(FixtureGarbage, MalformedFilesGiveReasonsNotCrashes) {
  const auto report = RunFixture({"garbage", "p5.48xlarge"}, std::make_shared<FakeFactSources>());
  ASSERT_EQ(report.checks.size(), core::Catalog::Of(core::FindingKind::Check).size());

  const auto& acs = ResultOf(report, "pci-acs");
  EXPECT_EQ(acs.status, CheckStatus::Warn);
  EXPECT_TRUE(Contains(acs.observed, "0000:00:01.0 (config space has 64 bytes"));
  EXPECT_TRUE(Contains(acs.observed, "0000:01:00.0 (extended capability list loops)"));

  const auto& memlock = ResultOf(report, "memlock-limit");
  EXPECT_EQ(memlock.status, CheckStatus::Warn);
  EXPECT_TRUE(Contains(memlock.message, "no soft and hard limit")) << memlock.message;

  const auto& removeipc = ResultOf(report, "removeipc");
  EXPECT_EQ(removeipc.status, CheckStatus::Warn);
  EXPECT_TRUE(Contains(removeipc.observed, "RemoveIPC=yes (logind default)"));
  EXPECT_TRUE(Contains(removeipc.observed, "is not a boolean; logind ignores it"));

  const auto& efa = ResultOf(report, "efa-device-count");
  EXPECT_EQ(efa.status, CheckStatus::Fail);
  EXPECT_TRUE(Contains(efa.observed, "unreadable vendor: rdmap16s0, rdmap17s0")) << efa.observed;

  EXPECT_EQ(ResultOf(report, "dev-shm-stale").status, CheckStatus::Skip);
}

TEST(FixtureGarbage, EmptyRootSkipsEverythingHostSide) {
  const auto report =
      RunFixture({"does-not-exist", std::nullopt}, std::make_shared<FakeFactSources>());
  for (const char* id : {"pci-acs", "removeipc", "dev-shm-stale", "efa-device-count"})
    EXPECT_EQ(ResultOf(report, id).status, CheckStatus::Skip) << id;
}

}  // namespace
}  // namespace ncclguard::test
