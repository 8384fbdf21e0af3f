// EFA devices seen by the kernel (sysfs, /dev/infiniband) and by libfabric, against the catalog.
#include "probes/checks/check_util.h"

namespace ncclguard::probes {
namespace {

class EfaDeviceCount : public Check {
 public:
  EfaDeviceCount()
      : Check({"efa-device-count", "efa-config", core::FindingLevel::Fail, 10,
               "EFA devices the kernel sees (/sys/class/infiniband/*/device/vendor 0x1d0f, "
               "/dev/infiniband/uverbs*) and libfabric's efa provider opens, against the instance "
               "type's count in the catalog.",
               "Fewer devices: check the EFA driver (dmesg | grep -i efa) and the instance's "
               "network interfaces, or replace the instance; more: add the instance type to the "
               "policy's instanceTypes."}) {}

  CheckResult Run(ProbeContext& context) const override {
    const EfaSysfsCount sysfs = CountEfaDevices(context.Files());
    const FabricFacts& fabric = context.Fabric();
    const std::string provider = context.Options().fabric_provider;
    std::string observed = "sysfs " + std::to_string(sysfs.devices) + ", /dev/infiniband uverbs " +
                           std::to_string(sysfs.uverbs) + ", libfabric " + provider + " ";
    observed += fabric.provider_found ? std::to_string(fabric.domains.size()) : "none";
    if (!sysfs.unreadable.empty())
      observed += " (unreadable vendor: " + Join(sysfs.unreadable) + ")";

    const core::InstanceType* instance = context.Instance();
    if (instance == nullptr) return Result(CheckStatus::Skip, observed, "", context.CatalogGap());
    const int expected = instance->efa_devices;
    const std::string expected_text = std::to_string(expected) + " (" + instance->name + ")";
    const int fabric_count = fabric.provider_found ? static_cast<int>(fabric.domains.size()) : -1;

    if (sysfs.devices < expected || sysfs.uverbs < expected) {
      return Result(CheckStatus::Fail, observed, expected_text,
                    std::to_string(std::min(sysfs.devices, sysfs.uverbs)) + " of " +
                        std::to_string(expected) +
                        " EFA devices visible to the kernel: jobs requesting the full count stay "
                        "Pending, or run with fewer network paths; check the EFA driver (dmesg "
                        "| grep -i efa) and the instance's network interfaces");
    }
    if (fabric_count >= 0 && fabric_count < expected) {
      return Result(CheckStatus::Fail, observed, expected_text,
                    "libfabric's " + provider + " provider opens " + std::to_string(fabric_count) +
                        " of " + std::to_string(expected) + " EFA devices");
    }
    if (sysfs.devices > expected) {
      return Result(CheckStatus::Warn, observed, expected_text,
                    "more EFA devices than the catalog lists for " + instance->name +
                        ": the pod EFA request the webhook sets may be too low; update the "
                        "policy's instanceTypes");
    }
    return Result(CheckStatus::Pass, observed, expected_text,
                  std::to_string(expected) + " EFA devices, as " + instance->name + " has");
  }
};

NCCLGUARD_REGISTER(EfaDeviceCount);

}  // namespace
}  // namespace ncclguard::probes
