// RLIMIT_MEMLOCK as the probe's own pod gets it from the container runtime; training pods on
// this node inherit the same limit.
#include <sys/resource.h>

#include "probes/checks/check_util.h"
#include "probes/host_parsers.h"

namespace ncclguard::probes {
namespace {

std::string Describe(const std::optional<std::uint64_t>& limit) {
  return limit ? FormatBytes(*limit) : "unlimited";
}

class MemlockLimitCheck : public Check {
 public:
  MemlockLimitCheck()
      : Check({"memlock-limit", "memlock", core::FindingLevel::Warn, 40,
               "The locked-memory limit (/proc/self/limits) that pods on this node inherit from "
               "the container runtime is not unlimited, so pods without IPC_LOCK cannot register "
               "NCCL's buffers.",
               "Set LimitMEMLOCK=infinity for containerd (a systemd drop-in) on a drained node or "
               "in the AMI; EFA pods get IPC_LOCK from the webhook meanwhile."}) {}

  CheckResult Run(ProbeContext& context) const override {
    // <root>/proc/self/limits: procfs answers for the reading process, so this is our own limit
    // whether the host's /proc is mounted under the root or not; fixtures provide the file.
    const auto text = context.Files().Read("/proc/self/limits");
    MemlockLimit limit;
    std::string source = "/proc/self/limits";
    if (text.content) {
      try {
        limit = ParseMemlockLimit(*text.content);
      } catch (const std::exception& e) {
        return Result(CheckStatus::Warn, "", "unlimited",
                      "cannot read the memlock limit: /proc/self/limits: " + std::string(e.what()));
      }
    } else {
      rlimit current{};
      if (getrlimit(RLIMIT_MEMLOCK, &current) != 0)
        return Result(CheckStatus::Skip, "", "unlimited", "cannot read the memlock limit");
      auto value = [](rlim_t v) -> std::optional<std::uint64_t> {
        if (v == RLIM_INFINITY) return std::nullopt;
        return static_cast<std::uint64_t>(v);
      };
      limit = {value(current.rlim_cur), value(current.rlim_max)};
      source = "getrlimit";
    }
    const std::string observed =
        "soft " + Describe(limit.soft) + ", hard " + Describe(limit.hard) + " (" + source + ")";
    if (!limit.soft) {
      return Result(CheckStatus::Pass, observed, "unlimited",
                    "containers on this node may lock unlimited memory");
    }
    CheckResult result = Result(
        CheckStatus::Warn, observed, "unlimited",
        "containers on this node inherit a " + Describe(limit.soft) +
            " locked-memory limit: only pods with IPC_LOCK (the webhook adds it to EFA pods) can "
            "register NCCL's buffers; anything else fails with 'Cannot allocate memory'");
    AttachFix(result, kContainerdMemlock);
    return result;
  }
};

NCCLGUARD_REGISTER(MemlockLimitCheck);

}  // namespace
}  // namespace ncclguard::probes
