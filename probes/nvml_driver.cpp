// NVML facts: driver version and per-GPU health (row remap, uncorrectable ECC, NVLink state).
// libnvidia-ml.so.1 is loaded at run time; the types come from the Toolkit's nvml.h.
#include <nvml.h>

#include <array>

#include "probes/dynamic_library.h"
#include "probes/gpu_driver.h"

namespace ncclguard::probes {
namespace {

struct NvmlApi {
  decltype(&nvmlInit_v2) init = nullptr;
  decltype(&nvmlShutdown) shutdown = nullptr;
  decltype(&nvmlErrorString) error_string = nullptr;
  decltype(&nvmlSystemGetDriverVersion) driver_version = nullptr;
  decltype(&nvmlDeviceGetCount_v2) device_count = nullptr;
  decltype(&nvmlDeviceGetHandleByIndex_v2) device_handle = nullptr;
  decltype(&nvmlDeviceGetName) device_name = nullptr;
  decltype(&nvmlDeviceGetPciInfo_v3) pci_info = nullptr;
  decltype(&nvmlDeviceGetRemappedRows) remapped_rows = nullptr;
  decltype(&nvmlDeviceGetTotalEccErrors) total_ecc = nullptr;
  decltype(&nvmlDeviceGetNvLinkState) nvlink_state = nullptr;

  std::string Describe(nvmlReturn_t result) const {
    const char* text = error_string != nullptr ? error_string(result) : nullptr;
    return text != nullptr ? text : "NVML error " + std::to_string(static_cast<int>(result));
  }
};

NvmlApi LoadNvmlApi(const DynamicLibrary& library) {
  NvmlApi api;
  api.init = library.Symbol<decltype(api.init)>("nvmlInit_v2");
  api.shutdown = library.Symbol<decltype(api.shutdown)>("nvmlShutdown");
  api.error_string = library.Symbol<decltype(api.error_string)>("nvmlErrorString");
  api.driver_version = library.Symbol<decltype(api.driver_version)>("nvmlSystemGetDriverVersion");
  api.device_count = library.Symbol<decltype(api.device_count)>("nvmlDeviceGetCount_v2");
  api.device_handle = library.Symbol<decltype(api.device_handle)>("nvmlDeviceGetHandleByIndex_v2");
  api.device_name = library.Symbol<decltype(api.device_name)>("nvmlDeviceGetName");
  api.pci_info = library.Symbol<decltype(api.pci_info)>("nvmlDeviceGetPciInfo_v3");
  api.remapped_rows = library.Symbol<decltype(api.remapped_rows)>("nvmlDeviceGetRemappedRows");
  api.total_ecc = library.Symbol<decltype(api.total_ecc)>("nvmlDeviceGetTotalEccErrors");
  api.nvlink_state = library.Symbol<decltype(api.nvlink_state)>("nvmlDeviceGetNvLinkState");
  return api;
}

void ReadHealth(const NvmlApi& api, nvmlDevice_t handle, GpuDevice& gpu) {
  if (api.remapped_rows == nullptr) {
    gpu.row_remap_error = "nvmlDeviceGetRemappedRows not in this driver";
  } else {
    RowRemap remap;
    unsigned pending = 0;
    unsigned failure = 0;
    const nvmlReturn_t result =
        api.remapped_rows(handle, &remap.correctable, &remap.uncorrectable, &pending, &failure);
    if (result == NVML_SUCCESS) {
      remap.pending = pending != 0;
      remap.failure = failure != 0;
      gpu.row_remap = remap;
    } else {
      gpu.row_remap_error = api.Describe(result);
    }
  }

  if (api.total_ecc == nullptr) {
    gpu.ecc_error = "nvmlDeviceGetTotalEccErrors not in this driver";
  } else {
    EccErrors ecc;
    nvmlReturn_t result = api.total_ecc(handle, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                        NVML_VOLATILE_ECC, &ecc.volatile_uncorrected);
    if (result == NVML_SUCCESS)
      result = api.total_ecc(handle, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC,
                             &ecc.aggregate_uncorrected);
    if (result == NVML_SUCCESS) {
      gpu.ecc = ecc;
    } else {
      gpu.ecc_error = api.Describe(result);
    }
  }

  if (api.nvlink_state == nullptr) {
    gpu.nvlink_error = "nvmlDeviceGetNvLinkState not in this driver";
    return;
  }
  NvLinks links;
  bool any_link = false;
  for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
    nvmlEnableState_t active = NVML_FEATURE_DISABLED;
    const nvmlReturn_t result = api.nvlink_state(handle, link, &active);
    if (result == NVML_ERROR_NOT_SUPPORTED || result == NVML_ERROR_INVALID_ARGUMENT) continue;
    if (result != NVML_SUCCESS) {
      gpu.nvlink_error = "link " + std::to_string(link) + ": " + api.Describe(result);
      return;
    }
    any_link = true;
    if (active == NVML_FEATURE_ENABLED) {
      ++links.active;
    } else {
      links.inactive.push_back(static_cast<int>(link));
    }
  }
  if (any_link) {
    gpu.nvlink = links;
  } else {
    gpu.nvlink_error = "no NVLink on this GPU";
  }
}

}  // namespace

void CollectNvmlFacts(GpuFacts& facts) {
  const DynamicLibrary library = DynamicLibrary::Open({"libnvidia-ml.so.1"});
  if (!library.Loaded()) {
    facts.nvml_error = "no NVIDIA driver (" + library.Error() + ")";
    return;
  }
  const NvmlApi api = LoadNvmlApi(library);
  if (!api.init || !api.shutdown || !api.device_count || !api.device_handle) {
    facts.nvml_error = library.Path() + " lacks nvmlInit_v2/nvmlDeviceGetCount_v2";
    return;
  }
  if (const nvmlReturn_t result = api.init(); result != NVML_SUCCESS) {
    facts.nvml_error = "nvmlInit: " + api.Describe(result);
    return;
  }
  facts.nvml_loaded = true;
  if (api.driver_version != nullptr) {
    std::array<char, NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE> version{};
    if (api.driver_version(version.data(), static_cast<unsigned>(version.size())) == NVML_SUCCESS)
      facts.driver_version = version.data();
  }
  unsigned count = 0;
  if (const nvmlReturn_t result = api.device_count(&count); result != NVML_SUCCESS) {
    facts.nvml_error = "nvmlDeviceGetCount: " + api.Describe(result);
    api.shutdown();
    return;
  }
  for (unsigned i = 0; i < count; ++i) {
    GpuDevice gpu;
    gpu.index = static_cast<int>(i);
    nvmlDevice_t handle = nullptr;
    if (const nvmlReturn_t result = api.device_handle(i, &handle); result != NVML_SUCCESS) {
      gpu.row_remap_error = gpu.ecc_error = gpu.nvlink_error =
          "nvmlDeviceGetHandleByIndex: " + api.Describe(result);
      facts.devices.push_back(gpu);
      continue;
    }
    if (api.device_name != nullptr) {
      std::array<char, NVML_DEVICE_NAME_V2_BUFFER_SIZE> name{};
      if (api.device_name(handle, name.data(), static_cast<unsigned>(name.size())) == NVML_SUCCESS)
        gpu.name = name.data();
    }
    if (api.pci_info != nullptr) {
      nvmlPciInfo_t pci{};
      if (api.pci_info(handle, &pci) == NVML_SUCCESS) gpu.pci_bus_id = pci.busId;
    }
    ReadHealth(api, handle, gpu);
    facts.devices.push_back(gpu);
  }
  api.shutdown();
}

}  // namespace ncclguard::probes
