// systemd-logind's RemoveIPC deletes a user's shared memory when their last session ends, under
// any job of theirs that shares the host's /dev/shm (Slurm, hostIPC pods).
#include "probes/checks/check_util.h"
#include "probes/host_parsers.h"

namespace ncclguard::probes {
namespace {

class RemoveIpc : public Check {
 public:
  RemoveIpc()
      : Check({"removeipc", "stale-shm", core::FindingLevel::Warn, 60,
               "systemd-logind's RemoveIPC (/etc/systemd/logind.conf and logind.conf.d/*.conf, "
               "default yes) deletes a user's shared memory when their last session ends, under "
               "running jobs of theirs.",
               "Set RemoveIPC=no in /etc/systemd/logind.conf and restart systemd-logind (the "
               "suggested command)."}) {}

  CheckResult Run(ProbeContext& context) const override {
    const HostFiles& files = context.Files();
    if (!files.Exists("/etc/systemd"))
      return Result(CheckStatus::Skip, "", "RemoveIPC=no",
                    "no /etc/systemd under the host root (host /etc not mounted, or no systemd)");

    // logind reads logind.conf, then its drop-ins in name order; the last setting wins.
    std::vector<std::string> sources{"/etc/systemd/logind.conf"};
    for (const std::string& name : files.List("/etc/systemd/logind.conf.d"))
      if (name.ends_with(".conf")) sources.push_back("/etc/systemd/logind.conf.d/" + name);

    bool remove_ipc = true;  // logind's default
    std::string decided_by = "logind default";
    std::vector<std::string> problems;
    for (const std::string& source : sources) {
      const auto text = files.Read(source);
      if (!text.content) continue;
      const RemoveIpcSetting setting = ParseRemoveIpc(*text.content);
      for (const std::string& problem : setting.problems)
        problems.push_back(source + " " + problem);
      if (setting.value) {
        remove_ipc = *setting.value;
        decided_by = source;
      }
    }

    std::string observed =
        std::string("RemoveIPC=") + (remove_ipc ? "yes" : "no") + " (" + decided_by + ")";
    if (!problems.empty()) observed += "; " + Join(problems, "; ");
    if (!remove_ipc) {
      return Result(problems.empty() ? CheckStatus::Pass : CheckStatus::Warn, observed,
                    "RemoveIPC=no",
                    problems.empty() ? "logind keeps IPC objects of logged-out users"
                                     : "logind keeps IPC objects, but its configuration has "
                                       "lines it ignores");
    }
    CheckResult result =
        Result(CheckStatus::Warn, observed, "RemoveIPC=no",
               "logind removes a user's shared memory when their last session ends: jobs of "
               "that user sharing the host's /dev/shm (Slurm, hostIPC pods) lose their NCCL "
               "segments and crash");
    AttachFix(result, kRemoveIpcNo);
    return result;
  }
};

NCCLGUARD_REGISTER(RemoveIpc);

}  // namespace
}  // namespace ncclguard::probes
