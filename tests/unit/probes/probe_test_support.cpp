#include "tests/unit/probes/probe_test_support.h"

#include <stdexcept>

#include "tests/unit/test_support.h"

namespace ncclguard::test {

FakeFactSources::FakeFactSources() : gpu(NoDriver()) {
  nccl.error = "libnccl.so.2 not found (test)";
  fabric.loaded = true;
  fabric.library = "libfabric.so.1";
  fabric.version = "1.22";
  fabric.error = "fi_getinfo(provider efa): No data available";
}

probes::FabricFacts EfaFabric(int devices) {
  probes::FabricFacts facts;
  facts.loaded = true;
  facts.library = "/opt/amazon/efa/lib/libfabric.so.1";
  facts.version = "1.22";
  facts.provider_found = devices > 0;
  for (int i = 0; i < devices; ++i) facts.domains.push_back("rdmap" + std::to_string(i) + "s0-rdm");
  facts.hmem_domains = facts.domains;
  return facts;
}

probes::GpuFacts HealthyGpus(int count) {
  probes::GpuFacts facts;
  facts.cuda_loaded = true;
  facts.cuda_driver_version = 12040;
  facts.cuda_device_count = count;
  const auto n = static_cast<std::size_t>(count);
  facts.peer_access.assign(n, std::vector<bool>(n, true));
  facts.nvml_loaded = true;
  facts.driver_version = "550.90.07";
  for (int i = 0; i < count; ++i) {
    probes::GpuDevice device;
    device.index = i;
    device.name = "NVIDIA H100 80GB HBM3";
    device.row_remap = probes::RowRemap{};
    device.ecc = probes::EccErrors{};
    device.nvlink = probes::NvLinks{18, {}};
    facts.devices.push_back(device);
  }
  return facts;
}

probes::GpuFacts NoDriver() {
  probes::GpuFacts facts;
  facts.cuda_error =
      "no CUDA driver (libcuda.so.1: cannot open shared object file: No such file or directory)";
  facts.nvml_error = "no NVIDIA driver (libnvidia-ml.so.1: cannot open shared object file)";
  return facts;
}

std::string FixturePath(const std::string& tree) {
  return SourcePath("tests/fixtures/probe/" + tree);
}

probes::ProbeReport RunFixture(const FixtureRun& run, std::shared_ptr<FakeFactSources> sources) {
  probes::ProbeOptions options;
  options.host_root = FixturePath(run.tree);
  options.instance_type = run.instance_type;
  options.instance_type_source = run.instance_type ? "test" : "not given";
  options.node_name = run.node_name;
  auto context = std::make_shared<probes::ProbeContext>(std::move(options), std::move(sources));
  return probes::RunProbe(context);
}

const probes::CheckResult& ResultOf(const probes::ProbeReport& report, const std::string& id) {
  for (const auto& result : report.checks)
    if (result.id == id) return result;
  throw std::out_of_range("no result for check " + id);
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace ncclguard::test
