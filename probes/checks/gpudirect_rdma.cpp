// GPUDirect RDMA: the efa provider can register GPU memory (FI_HMEM), on instance types that
// support it. Without it NCCL copies every message through host memory.
#include "probes/checks/check_util.h"

namespace ncclguard::probes {
namespace {

bool PeerMemoryModuleLoaded(const HostFiles& files) {
  const auto modules = files.Read("/proc/modules", 1 << 20);
  return modules.content && modules.content->find("nvidia_peermem ") != std::string::npos;
}

class GpudirectRdma : public Check {
 public:
  GpudirectRdma()
      : Check({"gpudirect-rdma", "efa-config", core::FindingLevel::Fail, 30,
               "On instance types with GPUDirect RDMA (catalog), every efa domain offers FI_HMEM, "
               "so GPU memory can be registered with the EFA devices (nvidia_peermem in "
               "/proc/modules is reported).",
               "Use the EFA installer's libfabric, and a GPU driver with dma-buf support or the "
               "nvidia_peermem module loaded."}) {}

  CheckResult Run(ProbeContext& context) const override {
    const core::InstanceType* instance = context.Instance();
    if (instance == nullptr) return Result(CheckStatus::Skip, "", "", context.CatalogGap());
    if (!instance->gpudirect_rdma)
      return Result(CheckStatus::Skip, "", "",
                    instance->name + " does not support GPUDirect RDMA (catalog)");
    const FabricFacts& fabric = context.Fabric();
    const std::string provider = context.Options().fabric_provider;
    if (!fabric.provider_found)
      return Result(CheckStatus::Skip, fabric.error, "",
                    "the " + provider + " provider is not available (see efa-provider)");

    const std::string observed =
        std::to_string(fabric.hmem_domains.size()) + " of " +
        std::to_string(fabric.domains.size()) + " " + provider + " domains offer FI_HMEM" +
        (PeerMemoryModuleLoaded(context.Files()) ? "; nvidia_peermem loaded" : "");
    const std::string expected =
        "FI_HMEM on every " + provider + " domain (" + instance->name + ")";
    if (fabric.hmem_domains.size() < fabric.domains.size()) {
      return Result(CheckStatus::Fail, observed, expected,
                    "GPU memory cannot be registered with every EFA device: NCCL stages "
                    "inter-node traffic through host memory; check that the EFA installer's "
                    "libfabric is used and the GPU driver supports dma-buf or nvidia_peermem");
    }
    return Result(CheckStatus::Pass, observed, expected, "GPUDirect RDMA is available");
  }
};

NCCLGUARD_REGISTER(GpudirectRdma);

}  // namespace
}  // namespace ncclguard::probes
