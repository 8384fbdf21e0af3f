// libfabric loads and its efa provider answers: otherwise NCCL silently uses TCP sockets.
#include "probes/checks/check_util.h"

namespace ncclguard::probes {
namespace {

class EfaProvider : public Check {
 public:
  EfaProvider()
      : Check({"efa-provider", "efa-tcp-fallback", core::FindingLevel::Fail, 20,
               "libfabric loads (the EFA installer's copy under /opt/amazon/efa first) and its "
               "efa provider answers fi_getinfo on a node with EFA devices; otherwise NCCL "
               "silently uses TCP sockets.",
               "Install the EFA software (aws-efa-installer) on the node and mount "
               "/opt/amazon/efa into the probe and the training pods."}) {}

  CheckResult Run(ProbeContext& context) const override {
    const FabricFacts& fabric = context.Fabric();
    const std::string provider = context.Options().fabric_provider;
    const core::InstanceType* instance = context.Instance();
    const int sysfs_devices = CountEfaDevices(context.Files()).devices;
    const bool expects_efa = instance != nullptr ? instance->efa_devices > 0 : sysfs_devices > 0;
    const std::string expected = "libfabric with the " + provider + " provider";

    if (fabric.provider_found) {
      return Result(CheckStatus::Pass,
                    "libfabric " + fabric.version + " (" + fabric.library + "): " + provider +
                        " provider, " + std::to_string(fabric.domains.size()) +
                        " domains: " + Join(fabric.domains),
                    expected, "the " + provider + " provider is available");
    }
    const std::string observed =
        fabric.loaded ? "libfabric " + fabric.version + " (" + fabric.library + "): " + fabric.error
                      : fabric.error;
    if (!expects_efa) {
      return Result(CheckStatus::Skip, observed, "",
                    instance != nullptr ? instance->name + " has no EFA devices in the catalog"
                                        : "no EFA device on this node and " + context.CatalogGap());
    }
    return Result(CheckStatus::Fail, observed, expected,
                  "libfabric cannot open the " + provider +
                      " provider: NCCL will fall back to TCP sockets; install the EFA software "
                      "(aws-efa-installer) on the node and mount /opt/amazon/efa into the probe");
  }
};

NCCLGUARD_REGISTER(EfaProvider);

}  // namespace
}  // namespace ncclguard::probes
