// The GPU checks over fixed CUDA/NVML answers: what a node without a driver, a healthy p5 and
// the common hardware faults look like in the report.
#include <gtest/gtest.h>

#include "tests/unit/probes/probe_test_support.h"

namespace ncclguard::test {
namespace {

using probes::CheckStatus;

const char* kGpuChecks[] = {"gpu-count", "gpu-p2p",       "gpu-row-remap",
                            "gpu-ecc",   "nvlink-status", "driver-version"};

probes::ProbeReport RunGpu(probes::GpuFacts gpu,
                           std::optional<std::string> instance_type = "p5.48xlarge") {
  auto sources = std::make_shared<FakeFactSources>();
  sources->gpu = std::move(gpu);
  return RunFixture({"does-not-exist", std::move(instance_type)}, sources);
}

TEST(GpuChecks, WithoutADriverEveryGpuCheckSkipsWithNoCudaDriver) {
  const auto report = RunGpu(NoDriver(), std::nullopt);
  for (const char* id : kGpuChecks) {
    const auto& result = ResultOf(report, id);
    EXPECT_EQ(result.status, CheckStatus::Skip) << id;
    EXPECT_TRUE(Contains(result.message, "no CUDA driver")) << id << ": " << result.message;
  }
}

TEST(GpuChecks, NoDriverOnAGpuInstanceTypeFailsGpuCount) {
  const auto report = RunGpu(NoDriver(), "p5.48xlarge");
  const auto& count = ResultOf(report, "gpu-count");
  EXPECT_EQ(count.status, CheckStatus::Fail);
  EXPECT_TRUE(Contains(count.message, "which has 8 GPUs")) << count.message;
  EXPECT_EQ(ResultOf(report, "gpu-p2p").status, CheckStatus::Skip);
}

TEST(GpuChecks, HealthyNodePasses) {
  const auto report = RunGpu(HealthyGpus());
  for (const char* id : kGpuChecks)
    EXPECT_EQ(ResultOf(report, id).status, CheckStatus::Pass)
        << id << ": " << ResultOf(report, id).message;
  EXPECT_EQ(ResultOf(report, "gpu-count").observed, "8 (CUDA), 8 (NVML)");
  EXPECT_EQ(ResultOf(report, "gpu-p2p").observed, "56 of 56 GPU pairs have peer access");
  EXPECT_EQ(ResultOf(report, "driver-version").observed, "driver 550.90.07, CUDA 12.4");
}

TEST(GpuChecks, MissingGpuFailsGpuCountWithTheDrainCommand) {
  const auto report = RunGpu(HealthyGpus(7));
  const auto& result = ResultOf(report, "gpu-count");
  EXPECT_EQ(result.status, CheckStatus::Fail);
  EXPECT_EQ(result.expected, "8 (p5.48xlarge)");
  EXPECT_TRUE(Contains(result.suggested_command, "kubectl cordon ip-10-0-0-1"));
  EXPECT_TRUE(Contains(result.guide, "#node-hardware"));
}

TEST(GpuChecks, BlockedPeerAccessFailsGpuP2p) {
  auto gpu = HealthyGpus();
  gpu.peer_access[0][3] = false;
  gpu.peer_access[3][0] = false;
  const auto report1 = RunGpu(gpu);
  const auto& result = ResultOf(report1, "gpu-p2p");
  EXPECT_EQ(result.status, CheckStatus::Fail);
  EXPECT_EQ(result.observed, "54 of 56 GPU pairs have peer access; none: 0->3, 3->0");
  EXPECT_TRUE(Contains(result.guide, "#gpu-p2p"));
}

TEST(GpuChecks, BandwidthOutlierWarns) {
  auto gpu = HealthyGpus(2);
  gpu.peer_bandwidth_gbps = {{0, 300}, {100, 0}};
  const auto report2 = RunGpu(gpu);
  const auto& result = ResultOf(report2, "gpu-p2p");
  EXPECT_EQ(result.status, CheckStatus::Warn);
  EXPECT_TRUE(Contains(result.observed, "min 100.0 GB/s, median 300.0 GB/s, max 300.0 GB/s"))
      << result.observed;
  EXPECT_TRUE(Contains(result.message, "1->0 100.0 GB/s"));
}

TEST(GpuChecks, PendingOrFailedRowRemapFails) {
  auto gpu = HealthyGpus();
  gpu.devices[2].row_remap->pending = true;
  gpu.devices[5].row_remap->failure = true;
  const auto report3 = RunGpu(gpu);
  const auto& result = ResultOf(report3, "gpu-row-remap");
  EXPECT_EQ(result.status, CheckStatus::Fail);
  EXPECT_EQ(result.observed,
            "8 GPUs checked; GPU 2: remap pending (reset needed); GPU 5: remapping failure "
            "occurred");
  EXPECT_TRUE(Contains(result.guide, "#gpu-row-remap"));
  EXPECT_FALSE(result.blast_radius.empty());
}

TEST(GpuChecks, RowRemapUnsupportedSkips) {
  auto gpu = HealthyGpus();
  for (auto& device : gpu.devices) device.row_remap.reset();
  EXPECT_EQ(ResultOf(RunGpu(gpu), "gpu-row-remap").status, CheckStatus::Skip);
}

TEST(GpuChecks, VolatileUncorrectableEccFailsLifetimeOnlyWarns) {
  auto gpu = HealthyGpus();
  gpu.devices[1].ecc->aggregate_uncorrected = 3;
  EXPECT_EQ(ResultOf(RunGpu(gpu), "gpu-ecc").status, CheckStatus::Warn);
  gpu.devices[4].ecc->volatile_uncorrected = 1;
  const auto report4 = RunGpu(gpu);
  const auto& result = ResultOf(report4, "gpu-ecc");
  EXPECT_EQ(result.status, CheckStatus::Fail);
  EXPECT_TRUE(Contains(result.observed, "GPU 4: 1 uncorrectable (volatile)"));
}

TEST(GpuChecks, InactiveNvlinkFails) {
  auto gpu = HealthyGpus();
  gpu.devices[6].nvlink = probes::NvLinks{16, {3, 9}};
  const auto report5 = RunGpu(gpu);
  const auto& result = ResultOf(report5, "nvlink-status");
  EXPECT_EQ(result.status, CheckStatus::Fail);
  EXPECT_TRUE(Contains(result.observed, "GPU 6: 16 active, inactive links 3, 9"));
}

TEST(GpuChecks, NvmlMissingWithCudaPresentWarnsDriverVersion) {
  auto gpu = HealthyGpus();
  gpu.nvml_loaded = false;
  gpu.nvml_error = "nvmlInit: Driver Not Loaded";
  const auto report = RunGpu(gpu);
  EXPECT_EQ(ResultOf(report, "driver-version").status, CheckStatus::Warn);
  EXPECT_EQ(ResultOf(report, "gpu-ecc").message, "nvmlInit: Driver Not Loaded");
}

TEST(NcclVersion, DecodesBothVersionEncodings) {
  auto sources = std::make_shared<FakeFactSources>();
  sources->nccl.loaded = true;
  sources->nccl.library = "libnccl.so.2";
  sources->nccl.version_code = 22105;
  auto report = RunFixture({"does-not-exist", std::nullopt}, sources);
  EXPECT_EQ(ResultOf(report, "nccl-version").observed, "NCCL 2.21.5 (libnccl.so.2)");
  sources->nccl.version_code = 2804;
  report = RunFixture({"does-not-exist", std::nullopt}, sources);
  EXPECT_EQ(ResultOf(report, "nccl-version").observed, "NCCL 2.8.4 (libnccl.so.2)");
}

}  // namespace
}  // namespace ncclguard::test
