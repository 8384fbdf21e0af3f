// libfabric's entry points, loaded at run time (the EFA installer's copy first, it carries the
// efa provider; else the system's), for the node checks (probes/libfabric.cpp) and the fabric
// tier of the peer checks (probes/peer_fabric.cpp). Everything else of libfabric's API is inline
// in its headers, reached through the objects these return.
#pragma once

#include <rdma/fabric.h>

#include <cstdint>

#include "probes/dynamic_library.h"

namespace ncclguard::probes {

// 1.14 has FI_HMEM and every EFA installer since 2021 ships a newer library.
inline constexpr std::uint32_t kLibfabricApiVersion = FI_VERSION(1, 14);

struct LibfabricApi {
  decltype(&fi_getinfo) get_info = nullptr;
  decltype(&fi_freeinfo) free_info = nullptr;
  decltype(&fi_dupinfo) dup_info = nullptr;
  decltype(&fi_strerror) str_error = nullptr;
  decltype(&fi_fabric) open_fabric = nullptr;
  decltype(&fi_version) version = nullptr;
  bool Complete() const {
    return get_info && free_info && dup_info && str_error && open_fabric && version;
  }
};

// The EFA installer's libfabric (lib or lib64), else the one on the loader's path.
DynamicLibrary OpenLibfabric();
// Its entry points; a missing one stays null (LibfabricApi::Complete).
LibfabricApi LibfabricSymbols(const DynamicLibrary& library);

}  // namespace ncclguard::probes
