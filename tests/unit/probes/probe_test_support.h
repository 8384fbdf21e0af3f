#pragma once

#include <memory>
#include <string>

#include "probes/context.h"
#include "probes/report.h"

namespace ncclguard::test {

// Fixed answers for what is not a plain host file (libfabric, CUDA, NVML, NCCL, statvfs, the
// clock), so that a fixture tree alone decides the outcome.
class FakeFactSources : public probes::FactSources {
 public:
  probes::FabricFacts fabric;
  probes::GpuFacts gpu;
  probes::NcclFacts nccl;
  std::optional<probes::FileSystemUsage> usage = probes::FileSystemUsage{64ull << 30, 60ull << 30};
  std::chrono::system_clock::time_point now = std::chrono::system_clock::now();

  FakeFactSources();
  probes::FabricFacts Fabric(const std::string&) override { return fabric; }
  probes::GpuFacts Gpu(bool) override { return gpu; }
  probes::NcclFacts Nccl() override { return nccl; }
  std::optional<probes::FileSystemUsage> Usage(const std::filesystem::path&) override {
    return usage;
  }
  std::chrono::system_clock::time_point Now() override { return now; }
};

// libfabric with the efa provider and `devices` domains, all with FI_HMEM.
probes::FabricFacts EfaFabric(int devices);
// A healthy 8-GPU H100 node: full peer access, 18 NVLinks each, no ECC errors or remaps.
probes::GpuFacts HealthyGpus(int count = 8);
// No libcuda, no libnvidia-ml, as on a machine without an NVIDIA driver.
probes::GpuFacts NoDriver();

std::string FixturePath(const std::string& tree);

struct FixtureRun {
  std::string tree;
  std::optional<std::string> instance_type;
  std::string node_name = "ip-10-0-0-1";
};
probes::ProbeReport RunFixture(const FixtureRun& run, std::shared_ptr<FakeFactSources> sources);

// Whether `text` holds `part` (a message or an observed value).
bool Contains(const std::string& text, const std::string& part);

const probes::CheckResult& ResultOf(const probes::ProbeReport& report, const std::string& id);

}  // namespace ncclguard::test
