// Host /dev/shm: leftover nccl-* segments of killed jobs, and how full it is.
#include <filesystem>

#include "probes/checks/check_util.h"
#include "probes/host_parsers.h"

namespace ncclguard::probes {
namespace {

// The guide's cleanup removes segments untouched for an hour; the check uses the same age.
constexpr auto kStaleAge = std::chrono::minutes(60);
constexpr double kFullFraction = 0.9;

class DevShmStale : public Check {
 public:
  DevShmStale()
      : Check({"dev-shm-stale", "stale-shm", core::FindingLevel::Fail, 50,
               "Host /dev/shm holds nccl-* segments untouched for 60 minutes (Warn) or is more "
               "than 90% used (Fail), which breaks NCCL's SHM transport for jobs that share it "
               "(hostIPC, Slurm).",
               "Remove nccl-* segments older than an hour from the host's /dev/shm (the suggested "
               "command) while no job runs on the node."}) {}

  CheckResult Run(ProbeContext& context) const override {
    const std::filesystem::path shm = context.Files().Path("/dev/shm");
    std::error_code error;
    if (!std::filesystem::is_directory(shm, error))
      return Result(CheckStatus::Skip, "", "", shm.string() + " is not a directory");

    const auto now = context.Now();
    int segments = 0;
    int stale = 0;
    std::uint64_t stale_bytes = 0;
    for (std::filesystem::directory_iterator it(shm, error), end; !error && it != end;
         it.increment(error)) {
      if (!it->path().filename().string().starts_with("nccl-")) continue;
      ++segments;
      std::error_code entry_error;
      const auto written = it->last_write_time(entry_error);
      if (entry_error) continue;
      const auto written_system = std::chrono::file_clock::to_sys(written);
      if (now - written_system < kStaleAge) continue;
      ++stale;
      const auto size = it->file_size(entry_error);
      if (!entry_error) stale_bytes += size;
    }

    std::string observed = std::to_string(segments) + " nccl-* segments, " + std::to_string(stale) +
                           " older than 60 min (" + FormatBytes(stale_bytes) + ")";
    const auto usage = context.Usage("/dev/shm");
    double used_fraction = 0;
    if (usage && usage->size_bytes > 0) {
      used_fraction = 1.0 - static_cast<double>(usage->available_bytes) /
                                static_cast<double>(usage->size_bytes);
      observed = FormatBytes(usage->size_bytes) + " /dev/shm, " +
                 std::to_string(static_cast<int>(used_fraction * 100 + 0.5)) + "% used; " +
                 observed;
    }
    const std::string expected = "no nccl-* segment older than 60 min; /dev/shm under 90% used";
    if (used_fraction >= kFullFraction) {
      CheckResult result =
          Result(CheckStatus::Fail, observed, expected,
                 "host /dev/shm is nearly full: NCCL's SHM transport fails with 'No space left on "
                 "device' or a bus error in jobs that share it (hostIPC, Slurm)");
      AttachFix(result, kRemoveStaleShm);
      return result;
    }
    if (stale > 0) {
      CheckResult result = Result(CheckStatus::Warn, observed, expected,
                                  std::to_string(stale) +
                                      " stale nccl-* segments in host /dev/shm left by killed "
                                      "jobs; they hold memory until removed");
      AttachFix(result, kRemoveStaleShm);
      return result;
    }
    return Result(CheckStatus::Pass, observed, expected, "no stale NCCL segments");
  }
};

NCCLGUARD_REGISTER(DevShmStale);

}  // namespace
}  // namespace ncclguard::probes
