// CUDA driver API facts: device count, the peer-access matrix and (on request) peer copy
// bandwidth. libcuda.so.1 is loaded at run time; the types come from the Toolkit headers.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <chrono>

#include "probes/dynamic_library.h"
#include "probes/facts.h"
#include "probes/gpu_driver.h"

namespace ncclguard::probes {
namespace {

struct CudaApi {
  PFN_cuInit_v2000 init = nullptr;
  PFN_cuDriverGetVersion_v2020 driver_get_version = nullptr;
  PFN_cuDeviceGetCount_v2000 device_get_count = nullptr;
  PFN_cuDeviceGet_v2000 device_get = nullptr;
  PFN_cuDeviceCanAccessPeer_v4000 can_access_peer = nullptr;
  PFN_cuGetErrorString_v6000 get_error_string = nullptr;
  PFN_cuDevicePrimaryCtxRetain_v7000 primary_ctx_retain = nullptr;
  PFN_cuDevicePrimaryCtxRelease_v11000 primary_ctx_release = nullptr;
  PFN_cuCtxSetCurrent_v4000 ctx_set_current = nullptr;
  PFN_cuCtxEnablePeerAccess_v4000 ctx_enable_peer_access = nullptr;
  PFN_cuMemAlloc_v3020 mem_alloc = nullptr;
  PFN_cuMemFree_v3020 mem_free = nullptr;
  PFN_cuMemcpyPeer_v4000 memcpy_peer = nullptr;
  PFN_cuCtxSynchronize_v2000 ctx_synchronize = nullptr;

  std::string Describe(CUresult result) const {
    const char* text = nullptr;
    if (get_error_string != nullptr && get_error_string(result, &text) == CUDA_SUCCESS && text)
      return text;
    return "CUDA error " + std::to_string(static_cast<int>(result));
  }
};

CudaApi LoadCudaApi(const DynamicLibrary& library) {
  CudaApi api;
  api.init = library.Symbol<PFN_cuInit_v2000>("cuInit");
  api.driver_get_version = library.Symbol<PFN_cuDriverGetVersion_v2020>("cuDriverGetVersion");
  api.device_get_count = library.Symbol<PFN_cuDeviceGetCount_v2000>("cuDeviceGetCount");
  api.device_get = library.Symbol<PFN_cuDeviceGet_v2000>("cuDeviceGet");
  api.can_access_peer = library.Symbol<PFN_cuDeviceCanAccessPeer_v4000>("cuDeviceCanAccessPeer");
  api.get_error_string = library.Symbol<PFN_cuGetErrorString_v6000>("cuGetErrorString");
  api.primary_ctx_retain =
      library.Symbol<PFN_cuDevicePrimaryCtxRetain_v7000>("cuDevicePrimaryCtxRetain");
  api.primary_ctx_release =
      library.Symbol<PFN_cuDevicePrimaryCtxRelease_v11000>("cuDevicePrimaryCtxRelease_v2");
  api.ctx_set_current = library.Symbol<PFN_cuCtxSetCurrent_v4000>("cuCtxSetCurrent");
  api.ctx_enable_peer_access =
      library.Symbol<PFN_cuCtxEnablePeerAccess_v4000>("cuCtxEnablePeerAccess");
  api.mem_alloc = library.Symbol<PFN_cuMemAlloc_v3020>("cuMemAlloc_v2");
  api.mem_free = library.Symbol<PFN_cuMemFree_v3020>("cuMemFree_v2");
  api.memcpy_peer = library.Symbol<PFN_cuMemcpyPeer_v4000>("cuMemcpyPeer");
  api.ctx_synchronize = library.Symbol<PFN_cuCtxSynchronize_v2000>("cuCtxSynchronize");
  return api;
}

bool HasBandwidthApi(const CudaApi& api) {
  return api.primary_ctx_retain && api.primary_ctx_release && api.ctx_set_current &&
         api.ctx_enable_peer_access && api.mem_alloc && api.mem_free && api.memcpy_peer &&
         api.ctx_synchronize;
}

// Copies a 256 MiB buffer from each GPU to each peer it can reach; GB/s of the best of 3 copies.
void MeasureBandwidth(const CudaApi& api, GpuFacts& facts) {
  constexpr std::size_t kBytes = 256u << 20;
  const int n = facts.cuda_device_count;
  std::vector<CUcontext> contexts(static_cast<std::size_t>(n), nullptr);
  std::vector<CUdeviceptr> buffers(static_cast<std::size_t>(n), 0);
  auto fail = [&](const std::string& what, CUresult result) {
    facts.bandwidth_error = what + ": " + api.Describe(result);
  };
  for (int i = 0; i < n && facts.bandwidth_error.empty(); ++i) {
    const auto index = static_cast<std::size_t>(i);
    CUdevice device = 0;
    CUresult result = api.device_get(&device, i);
    if (result == CUDA_SUCCESS) result = api.primary_ctx_retain(&contexts[index], device);
    if (result == CUDA_SUCCESS) result = api.ctx_set_current(contexts[index]);
    if (result == CUDA_SUCCESS) result = api.mem_alloc(&buffers[index], kBytes);
    if (result != CUDA_SUCCESS) fail("GPU " + std::to_string(i) + " setup", result);
  }
  facts.peer_bandwidth_gbps.assign(static_cast<std::size_t>(n),
                                   std::vector<double>(static_cast<std::size_t>(n), 0.0));
  for (int src = 0; src < n && facts.bandwidth_error.empty(); ++src) {
    for (int dst = 0; dst < n && facts.bandwidth_error.empty(); ++dst) {
      const auto s = static_cast<std::size_t>(src);
      const auto d = static_cast<std::size_t>(dst);
      if (src == dst || !facts.peer_access[s][d]) continue;
      api.ctx_set_current(contexts[s]);
      const CUresult enable = api.ctx_enable_peer_access(contexts[d], 0);
      if (enable != CUDA_SUCCESS && enable != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
        fail("enabling peer access " + std::to_string(src) + "->" + std::to_string(dst), enable);
        break;
      }
      double best_seconds = 0;
      for (int attempt = 0; attempt < 3; ++attempt) {
        const auto start = std::chrono::steady_clock::now();
        CUresult result = api.memcpy_peer(buffers[d], contexts[d], buffers[s], contexts[s], kBytes);
        if (result == CUDA_SUCCESS) result = api.ctx_synchronize();
        if (result != CUDA_SUCCESS) {
          fail("copy " + std::to_string(src) + "->" + std::to_string(dst), result);
          break;
        }
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (attempt == 0 || seconds < best_seconds) best_seconds = seconds;
      }
      if (best_seconds > 0)
        facts.peer_bandwidth_gbps[s][d] = static_cast<double>(kBytes) / best_seconds / 1e9;
    }
  }
  for (int i = 0; i < n; ++i) {
    const auto index = static_cast<std::size_t>(i);
    if (contexts[index] == nullptr) continue;
    api.ctx_set_current(contexts[index]);
    if (buffers[index] != 0) api.mem_free(buffers[index]);
    CUdevice device = 0;
    if (api.device_get(&device, i) == CUDA_SUCCESS) api.primary_ctx_release(device);
  }
}

}  // namespace

void CollectCudaFacts(bool measure_bandwidth, GpuFacts& facts) {
  const DynamicLibrary library = DynamicLibrary::Open({"libcuda.so.1"});
  if (!library.Loaded()) {
    facts.cuda_error = "no CUDA driver (" + library.Error() + ")";
    return;
  }
  const CudaApi api = LoadCudaApi(library);
  if (!api.init || !api.driver_get_version || !api.device_get_count || !api.device_get ||
      !api.can_access_peer) {
    facts.cuda_error = "no CUDA driver (" + library.Path() + " lacks the driver API symbols)";
    return;
  }
  const CUresult init = api.init(0);
  if (init == CUDA_ERROR_NO_DEVICE) {
    // A driver without GPUs (all fallen off the bus, or a CPU node): gpu-count judges that.
    facts.cuda_loaded = true;
    api.driver_get_version(&facts.cuda_driver_version);
    return;
  }
  if (init != CUDA_SUCCESS) {
    facts.cuda_error = "no CUDA driver (cuInit: " + api.Describe(init) + ")";
    return;
  }
  facts.cuda_loaded = true;
  api.driver_get_version(&facts.cuda_driver_version);
  if (const CUresult result = api.device_get_count(&facts.cuda_device_count);
      result != CUDA_SUCCESS) {
    facts.peer_access_error = "cuDeviceGetCount: " + api.Describe(result);
    return;
  }
  const auto n = static_cast<std::size_t>(facts.cuda_device_count);
  facts.peer_access.assign(n, std::vector<bool>(n, false));
  for (int i = 0; i < facts.cuda_device_count; ++i) {
    for (int j = 0; j < facts.cuda_device_count; ++j) {
      if (i == j) continue;
      CUdevice a = 0;
      CUdevice b = 0;
      int can = 0;
      CUresult result = api.device_get(&a, i);
      if (result == CUDA_SUCCESS) result = api.device_get(&b, j);
      if (result == CUDA_SUCCESS) result = api.can_access_peer(&can, a, b);
      if (result != CUDA_SUCCESS) {
        facts.peer_access_error = "cuDeviceCanAccessPeer(" + std::to_string(i) + ", " +
                                  std::to_string(j) + "): " + api.Describe(result);
        return;
      }
      facts.peer_access[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] = can != 0;
    }
  }
  if (!measure_bandwidth) return;
  if (!HasBandwidthApi(api)) {
    facts.bandwidth_error = library.Path() + " lacks the memory/peer-copy symbols";
    return;
  }
  MeasureBandwidth(api, facts);
}

}  // namespace ncclguard::probes
