// NCCL on the host, if any (libnccl.so.2). Training images bring their own; the host copy
// matters for Slurm jobs and for images that mount it.
#include "probes/checks/check_util.h"

namespace ncclguard::probes {
namespace {

std::string DecodeNcclVersion(int code) {
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch; older releases major*1000 + ...
  const bool wide = code >= 10000;
  const int major = wide ? code / 10000 : code / 1000;
  const int minor = wide ? (code % 10000) / 100 : (code % 1000) / 100;
  const int patch = code % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

class NcclVersion : public Check {
 public:
  std::string_view Id() const override { return "nccl-version"; }

  CheckResult Run(ProbeContext& context) const override {
    const NcclFacts& nccl = context.Nccl();
    if (!nccl.loaded)
      return Result(CheckStatus::Skip, "", "",
                    nccl.error +
                        "; NCCL ships in the training image (rule image-mismatch keeps "
                        "one image per job)");
    return Result(CheckStatus::Pass,
                  "NCCL " + DecodeNcclVersion(nccl.version_code) + " (" + nccl.library + ")", "",
                  "NCCL " + DecodeNcclVersion(nccl.version_code) + " on the host");
  }
};

const RegisterCheck<NcclVersion> kRegistered;

}  // namespace
}  // namespace ncclguard::probes
