// A stand-in libnvidia-ml.so.1 (see fake_cuda.cpp): NCCLGUARD_FAKE_GPUS GPUs, driver
// 550.90.07, 18 NVLinks each; NCCLGUARD_FAKE_REMAP_PENDING=<gpu> flags a pending row remap and
// NCCLGUARD_FAKE_LINK_DOWN=<gpu> takes link 5 of that GPU down.
#include <nvml.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

unsigned GpuCount() {
  const char* count = std::getenv("NCCLGUARD_FAKE_GPUS");
  return count != nullptr ? static_cast<unsigned>(std::atoi(count)) : 8u;
}

int EnvGpu(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : -1;
}

unsigned IndexOf(nvmlDevice_t device) {
  return static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(device) - 1);
}

}  // namespace

extern "C" {

nvmlReturn_t DECLDIR nvmlInit_v2(void) { return NVML_SUCCESS; }
nvmlReturn_t DECLDIR nvmlShutdown(void) { return NVML_SUCCESS; }
const DECLDIR char* nvmlErrorString(nvmlReturn_t) { return "fake NVML error"; }

nvmlReturn_t DECLDIR nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  std::snprintf(version, length, "550.90.07");
  return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = GpuCount();
  return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (index >= GpuCount()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = reinterpret_cast<nvmlDevice_t>(std::uintptr_t{index + 1});
  return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetName(nvmlDevice_t, char* name, unsigned int length) {
  std::snprintf(name, length, "NVIDIA H100 80GB HBM3");
  return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof *pci);
  std::snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", 0x53 + IndexOf(device));
  return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* correctable,
                                               unsigned int* uncorrectable, unsigned int* pending,
                                               unsigned int* failure) {
  *correctable = 0;
  *uncorrectable = 0;
  *pending = static_cast<int>(IndexOf(device)) == EnvGpu("NCCLGUARD_FAKE_REMAP_PENDING") ? 1 : 0;
  *failure = 0;
  return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetTotalEccErrors(nvmlDevice_t, nvmlMemoryErrorType_t,
                                                 nvmlEccCounterType_t, unsigned long long* count) {
  *count = 0;
  return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                              nvmlEnableState_t* active) {
  if (link >= 18) return NVML_ERROR_INVALID_ARGUMENT;
  const bool down =
      static_cast<int>(IndexOf(device)) == EnvGpu("NCCLGUARD_FAKE_LINK_DOWN") && link == 5;
  *active = down ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}

}  // extern "C"
