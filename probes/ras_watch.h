// The probe's reading of NCCL's RAS (guide section 9; core/ras.h) while jobs run: every
// interval, the pods on this node that the controller marked as their job's RAS reader
// (core::kRasReaderLabel, one pod a job) are queried at once, each from inside its own network
// namespace (RAS stays bound to the pod's localhost; nothing new is exposed on the pod network),
// each report judged against the one read before from the same pod, and what changed written to
// this node's NodeValidation as status.ras, which the controller turns into the job's NcclHealth
// condition.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/ras.h"
#include "kube/client.h"
#include "kube/stop_token.h"
#include "probes/ras_client.h"

namespace ncclguard::probes {

struct RasPodStanding;

struct RasWatchOptions {
  std::chrono::milliseconds period{60'000};
  // One round's queries all end by then (RAS is told TIMEOUT of this less a second).
  std::chrono::milliseconds timeout{10'000};
  // A pod is not queried before its containers have run this long, unless one of its earlier
  // answers said NCCL 2.27.3 or later: a query during communicator initialisation could crash
  // NCCL before 2.27.3.
  std::chrono::milliseconds init_grace{120'000};
  // The host's /proc, where the pods' processes and their network namespaces are found.
  std::string proc_root = "/host/proc";
  // Ask for NCCL's JSON report (2.28.7 and later) instead of the text. Text by default: it says
  // the same for a verdict in a few hundred bytes at any job size, where the JSON lists every rank
  // (537 B a rank): at 100 jobs of 256 ranks a round reads 54 kB instead of 13.4 MB and takes 42
  // instead of 180 ms of the probe's CPU (BENCHMARKS.md, "RAS reads").
  bool json = false;
  // What a round's answers may hold together (QueryRas keeps them until the round ends): each
  // answer gets its share, between 64 KiB and core::kMaxRasReportBytes. A report cut at its share
  // is read as far as it goes (a text report's DEAD and ERROR sections come first).
  std::size_t round_bytes = 64 << 20;
  std::function<std::chrono::system_clock::time_point()> clock = std::chrono::system_clock::now;
  // After each round: what it saw and how long it took (the probe's metrics).
  std::function<void(const std::vector<RasPodStanding>&, double seconds)> on_round;
};

// The cluster side: the reader pods on this node, and this node's status.ras.
class RasDirectory {
 public:
  virtual ~RasDirectory() = default;
  virtual std::vector<core::Json> ReaderPods() = 0;
  virtual void Publish(const core::Json& ras) = 0;
};

class KubeRasDirectory final : public RasDirectory {
 public:
  KubeRasDirectory(std::shared_ptr<kube::Client> client, std::string node_name,
                   std::string field_manager = "ncclguard-probe");
  std::vector<core::Json> ReaderPods() override;
  void Publish(const core::Json& ras) override;

 private:
  std::shared_ptr<kube::Client> client_;
  std::string node_name_;
  std::string field_manager_;
};

// Where a pod's RAS is reached: NCCL_RAS_ADDR from its containers' env (host:port; the default
// localhost:28028), and whether NCCL_RAS_ENABLE=0 turned it off. Only literal env values are
// read.
struct RasEndpoint {
  std::string host = "127.0.0.1";
  std::uint16_t port = 28028;
  bool disabled = false;
};
RasEndpoint RasEndpointOf(const core::Json& pod);

// The /proc/PID/ns/net of a process of each pod (by its UID, found in the process's cgroup path:
// "pod<uid>" with the cgroupfs driver, "pod<uid_with_underscores>" with systemd's), one pass
// over `proc_root`; pods without a process there are absent.
std::map<std::string, std::string> PodNetworkNamespaces(const std::string& proc_root,
                                                        const std::vector<std::string>& uids);
// Whether the process whose namespace file is `netns` (<proc_root>/<pid>/ns/net) is still one of
// the pod `uid`'s (its cgroup names the pod): a PID kept from an earlier round.
bool StillPodProcess(const std::string& netns, const std::string& uid);

// What one round saw of one pod, as written under status.ras.pods[].
struct RasPodStanding {
  std::string namespace_;
  std::string pod;
  std::string uid;
  std::string answer;  // RasAnswerStatusName, or "Waiting" (init grace), "Disabled", "NoProcess",
                       // "Unreadable" (answered, no report in it)
  std::optional<core::RasVerdict> verdict;
  std::string nccl_version;
  std::string message;  // for an answer other than Answered: why
};
core::Json RasPodJson(const RasPodStanding& standing, const std::string& since);

class RasWatcher {
 public:
  // queries, the round's deadline, and the bytes each answer may keep.
  using Query = std::function<std::vector<RasAnswer>(const std::vector<RasQuery>&,
                                                     std::chrono::milliseconds, std::size_t)>;
  RasWatcher(RasWatchOptions options, std::shared_ptr<RasDirectory> directory,
             Query query = DefaultQuery);

  static std::vector<RasAnswer> DefaultQuery(const std::vector<RasQuery>& queries,
                                             std::chrono::milliseconds deadline,
                                             std::size_t max_report_bytes) {
    return QueryRas(queries, deadline, max_report_bytes);
  }
  // One round: list, query, judge, publish on change. Returns what it saw.
  std::vector<RasPodStanding> Round();
  // Rounds every period until stopped.
  void Run(const kube::StopToken& stop);

 private:
  struct Memory {
    std::optional<core::RasReport> last;  // the previous report, for a stuck collective
    bool nccl_new_enough = false;         // an answer said 2.27.3 or later
    std::string key;                      // what was published of it, less `since`
    std::string since;                    // when that last changed
  };
  RasWatchOptions options_;
  std::shared_ptr<RasDirectory> directory_;
  Query query_;
  std::map<std::string, Memory> memory_;  // by pod UID
  // The network namespace file found for each pod, by UID: checked (its cgroup still names the
  // pod) instead of scanning /proc again, which costs with the node's processes, not its pods.
  std::map<std::string, std::string> namespaces_;
  std::optional<core::Json> published_;
};

// Whether `version` ("2.27.3") is 2.27.3 or later: queries during initialisation are safe.
bool RasQuerySafeDuringInit(const std::string& version);

}  // namespace ncclguard::probes
