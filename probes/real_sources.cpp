#include <sys/statvfs.h>

#include "probes/dynamic_library.h"
#include "probes/facts.h"
#include "probes/gpu_driver.h"

namespace ncclguard::probes {

GpuFacts RealFactSources::Gpu(bool measure_bandwidth) {
  GpuFacts facts;
  CollectCudaFacts(measure_bandwidth, facts);
  CollectNvmlFacts(facts);
  return facts;
}

NcclFacts RealFactSources::Nccl() {
  NcclFacts facts;
  const DynamicLibrary library = DynamicLibrary::Open({"libnccl.so.2"});
  if (!library.Loaded()) {
    facts.error = "libnccl.so.2 not found (" + library.Error() + ")";
    return facts;
  }
  facts.library = library.Path();
  // ncclResult_t ncclGetVersion(int*): ncclResult_t is an enum whose success value is 0. NCCL's
  // header is not in the Toolkit wheels, and this one stable signature is all we call.
  using GetVersion = int (*)(int*);
  const auto get_version = library.Symbol<GetVersion>("ncclGetVersion");
  if (get_version == nullptr) {
    facts.error = library.Path() + " has no ncclGetVersion";
    return facts;
  }
  if (const int rc = get_version(&facts.version_code); rc != 0) {
    facts.error = "ncclGetVersion returned " + std::to_string(rc);
    return facts;
  }
  facts.loaded = true;
  return facts;
}

std::optional<FileSystemUsage> RealFactSources::Usage(const std::filesystem::path& path) {
  struct statvfs stats {};
  if (statvfs(path.c_str(), &stats) != 0) return std::nullopt;
  return FileSystemUsage{static_cast<std::uint64_t>(stats.f_blocks) * stats.f_frsize,
                         static_cast<std::uint64_t>(stats.f_bavail) * stats.f_frsize};
}

std::chrono::system_clock::time_point RealFactSources::Now() {
  return std::chrono::system_clock::now();
}

}  // namespace ncclguard::probes
