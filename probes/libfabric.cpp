// libfabric, loaded at run time: the EFA installer's copy when the node has one (it carries the
// efa provider), else the system's.
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "probes/dynamic_library.h"
#include "probes/facts.h"
#include "probes/libfabric_api.h"

namespace ncclguard::probes {
namespace {

bool ProviderMatches(const fi_info* info, const std::string& provider) {
  if (info->fabric_attr == nullptr || info->fabric_attr->prov_name == nullptr) return false;
  // Utility providers layer over core ones ("tcp;ofi_rxm"); the core provider comes first.
  const std::string name = info->fabric_attr->prov_name;
  return name == provider || name.starts_with(provider + ";");
}

// Distinct domain names of RDM endpoints of the provider, optionally requiring capabilities.
std::vector<std::string> Domains(const LibfabricApi& api, const std::string& provider,
                                 std::uint64_t required_caps, std::string& error) {
  fi_info* hints = api.dup_info(nullptr);
  if (hints == nullptr) {
    error = "fi_dupinfo failed";
    return {};
  }
  hints->fabric_attr->prov_name = strdup(provider.c_str());
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = required_caps;
  // Declare support for every mode and memory-registration mode bit, as NCCL's OFI plugin
  // effectively does: a provider that needs one the hints lack would be filtered out, and the
  // efa provider needs FI_MR_LOCAL, FI_MR_VIRT_ADDR, FI_MR_ALLOCATED, FI_MR_PROV_KEY (and
  // FI_MR_HMEM for device memory).
  hints->mode = ~0ULL;
  hints->domain_attr->mode = ~0ULL;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                                FI_MR_ENDPOINT | FI_MR_RAW | FI_MR_HMEM;
  fi_info* infos = nullptr;
  const int rc = api.get_info(kLibfabricApiVersion, nullptr, nullptr, 0, hints, &infos);
  api.free_info(hints);
  std::set<std::string> names;
  if (rc != 0) {
    error = "fi_getinfo(provider " + provider + "): " + api.str_error(-rc);
    return {};
  }
  for (const fi_info* info = infos; info != nullptr; info = info->next) {
    if (!ProviderMatches(info, provider) || info->domain_attr == nullptr ||
        info->domain_attr->name == nullptr)
      continue;
    names.insert(info->domain_attr->name);
  }
  api.free_info(infos);
  return {names.begin(), names.end()};
}

}  // namespace

DynamicLibrary OpenLibfabric() {
  return DynamicLibrary::Open({"/opt/amazon/efa/lib/libfabric.so.1",
                               "/opt/amazon/efa/lib64/libfabric.so.1", "libfabric.so.1"});
}

LibfabricApi LibfabricSymbols(const DynamicLibrary& library) {
  return {library.Symbol<decltype(&fi_getinfo)>("fi_getinfo"),
          library.Symbol<decltype(&fi_freeinfo)>("fi_freeinfo"),
          library.Symbol<decltype(&fi_dupinfo)>("fi_dupinfo"),
          library.Symbol<decltype(&fi_strerror)>("fi_strerror"),
          library.Symbol<decltype(&fi_fabric)>("fi_fabric"),
          library.Symbol<decltype(&fi_version)>("fi_version")};
}

FabricFacts RealFactSources::Fabric(const std::string& provider) {
  FabricFacts facts;
  const DynamicLibrary library = OpenLibfabric();
  if (!library.Loaded()) {
    facts.error = "libfabric not loadable: " + library.Error();
    return facts;
  }
  facts.library = library.Path();
  // The EFA installer's copy is there but would not load (a missing rdma-core library in the
  // probe's image, say): say so, the system copy rarely has the efa provider.
  for (const char* installer :
       {"/opt/amazon/efa/lib/libfabric.so.1", "/opt/amazon/efa/lib64/libfabric.so.1"}) {
    std::error_code error;
    if (library.Path() != installer && std::filesystem::exists(installer, error))
      facts.library += " (" + std::string(installer) + " did not load: " + library.Error() + ")";
  }
  const LibfabricApi api = LibfabricSymbols(library);
  if (!api.Complete()) {
    facts.error = library.Path() +
                  ": missing one of fi_getinfo, fi_freeinfo, fi_dupinfo, fi_strerror, fi_fabric, "
                  "fi_version";
    return facts;
  }
  facts.loaded = true;
  const std::uint32_t v = api.version();
  facts.version = std::to_string(FI_MAJOR(v)) + "." + std::to_string(FI_MINOR(v));
  if (v < kLibfabricApiVersion) {
    facts.error = "libfabric " + facts.version + " is older than 1.14 (no FI_HMEM)";
    return facts;
  }
  facts.domains = Domains(api, provider, 0, facts.error);
  facts.provider_found = !facts.domains.empty();
  if (facts.provider_found) {
    std::string hmem_error;
    facts.hmem_domains = Domains(api, provider, FI_MSG | FI_RMA | FI_HMEM, hmem_error);
  }
  return facts;
}

}  // namespace ncclguard::probes
