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
  NcclVersion()
      : Check({"nccl-version", "nccl-version", core::FindingLevel::Info, 130,
               "The NCCL version of the host's libnccl.so.2, if any (ncclGetVersion); the "
               "version-drift diagnosis compares it across a job's nodes.",
               "Nothing on one node; keep NCCL the same on every node of a job, and ship it in "
               "one pinned training image."}) {}

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

NCCLGUARD_REGISTER(NcclVersion);

}  // namespace
}  // namespace ncclguard::probes
