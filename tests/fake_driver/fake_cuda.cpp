// A stand-in libcuda.so.1 for machines without an NVIDIA driver: the CUDA driver API subset the
// probe calls, answering like a node described by NCCLGUARD_FAKE_GPUS (GPU count, default 8)
// and NCCLGUARD_FAKE_NO_PEER ("0-3": GPUs 0 and 3 cannot reach each other). It lets the tests
// drive the probe's real dlopen/dlsym path and fact collection end to end.
#include <cuda.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace {

int GpuCount() {
  const char* count = std::getenv("NCCLGUARD_FAKE_GPUS");
  return count != nullptr ? std::atoi(count) : 8;
}

bool PeerBlocked(int a, int b) {
  const char* blocked = std::getenv("NCCLGUARD_FAKE_NO_PEER");
  if (blocked == nullptr) return false;
  const std::string pair = std::to_string(a) + "-" + std::to_string(b);
  const std::string reverse = std::to_string(b) + "-" + std::to_string(a);
  return pair == blocked || reverse == blocked;
}

// Contexts and device pointers are opaque to the probe; encode the device in them.
CUcontext ContextOf(int device) { return reinterpret_cast<CUcontext>(std::intptr_t{device + 1}); }

}  // namespace

extern "C" {

CUresult CUDAAPI cuInit(unsigned int) {
  return GpuCount() > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

CUresult CUDAAPI cuDriverGetVersion(int* version) {
  *version = 12040;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  *count = GpuCount();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  if (ordinal < 0 || ordinal >= GpuCount()) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceCanAccessPeer(int* can, CUdevice a, CUdevice b) {
  *can = a != b && !PeerBlocked(a, b) ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char** text) {
  *text = error == CUDA_ERROR_NO_DEVICE ? "no CUDA-capable device is detected" : "fake error";
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  *context = ContextOf(device);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext, unsigned int) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSynchronize(void) { return CUDA_SUCCESS; }

// Buffers and copies are capped at 1 MiB: the probe's 256 MiB per GPU would make the tests slow,
// and the bandwidth a fake reports means nothing anyway.
constexpr size_t kFakeBufferBytes = 1 << 20;

CUresult CUDAAPI cuMemAlloc(CUdeviceptr* pointer, size_t) {
  *pointer = reinterpret_cast<CUdeviceptr>(std::malloc(kFakeBufferBytes));
  return *pointer != 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult CUDAAPI cuMemFree(CUdeviceptr pointer) {
  std::free(reinterpret_cast<void*>(pointer));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr destination, CUcontext, CUdeviceptr source, CUcontext,
                              size_t) {
  std::memcpy(reinterpret_cast<void*>(destination), reinterpret_cast<const void*>(source),
              kFakeBufferBytes);
  return CUDA_SUCCESS;
}

}  // extern "C"
