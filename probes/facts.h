#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ncclguard::probes {

// What libfabric reports for one provider (fi_getinfo with that provider name, RDM endpoints).
struct FabricFacts {
  bool loaded = false;
  std::string library;  // path or soname that loaded
  std::string version;  // fi_version() of the loaded library, "1.22"
  std::string error;    // why it did not load, or why fi_getinfo failed
  bool provider_found = false;
  std::vector<std::string> domains;  // distinct domain names, one per device for efa
  // Domains that also answer with the FI_HMEM capability (device memory registration, which
  // GPUDirect RDMA needs).
  std::vector<std::string> hmem_domains;
};

struct RowRemap {
  unsigned correctable = 0;
  unsigned uncorrectable = 0;
  bool pending = false;
  bool failure = false;
};

struct EccErrors {
  unsigned long long volatile_uncorrected = 0;
  unsigned long long aggregate_uncorrected = 0;
};

struct NvLinks {
  int active = 0;
  std::vector<int> inactive;  // link numbers the GPU has but reports down
};

// One GPU as NVML sees it. A value the driver does not support stays empty, with the reason.
struct GpuDevice {
  int index = 0;
  std::string name;
  std::string pci_bus_id;
  std::optional<RowRemap> row_remap;
  std::string row_remap_error;
  std::optional<EccErrors> ecc;
  std::string ecc_error;
  std::optional<NvLinks> nvlink;
  std::string nvlink_error;
};

struct GpuFacts {
  // CUDA driver API (libcuda.so.1).
  bool cuda_loaded = false;
  std::string cuda_error;       // "no CUDA driver: ..." when not loaded or cuInit failed
  int cuda_driver_version = 0;  // 12040 for 12.4
  int cuda_device_count = 0;
  std::vector<std::vector<bool>> peer_access;  // [i][j], CUDA ordinals
  std::string peer_access_error;
  // GB/s per ordered pair with --bandwidth; empty otherwise.
  std::vector<std::vector<double>> peer_bandwidth_gbps;
  std::string bandwidth_error;

  // NVML (libnvidia-ml.so.1).
  bool nvml_loaded = false;
  std::string nvml_error;
  std::string driver_version;  // "550.90.07"
  std::vector<GpuDevice> devices;
};

struct NcclFacts {
  bool loaded = false;
  std::string library;
  std::string error;
  int version_code = 0;  // ncclGetVersion: 22105 for 2.21.5
};

struct FileSystemUsage {
  std::uint64_t size_bytes = 0;
  std::uint64_t available_bytes = 0;
};

// Where the checks get what is not a plain host file. The real sources load the vendor
// libraries; unit tests substitute fixed answers.
class FactSources {
 public:
  virtual ~FactSources() = default;
  virtual FabricFacts Fabric(const std::string& provider) = 0;
  virtual GpuFacts Gpu(bool measure_bandwidth) = 0;
  virtual NcclFacts Nccl() = 0;
  virtual std::optional<FileSystemUsage> Usage(const std::filesystem::path& path) = 0;
  virtual std::chrono::system_clock::time_point Now() = 0;
};

class RealFactSources : public FactSources {
 public:
  FabricFacts Fabric(const std::string& provider) override;
  GpuFacts Gpu(bool measure_bandwidth) override;
  NcclFacts Nccl() override;
  std::optional<FileSystemUsage> Usage(const std::filesystem::path& path) override;
  std::chrono::system_clock::time_point Now() override;
};

}  // namespace ncclguard::probes
