// NCCL's RAS reports (guide section 9): what the RAS service in every NCCL process (2.24 and
// later) answers to STATUS / VERBOSE STATUS, read into one model from both of its formats (the
// text of `ncclras` or `echo verbose status | nc localhost 28028`, every layout since 2.24; the
// JSON of `SET FORMAT json`, 2.28.7 and later), and the verdict ncclguard draws from one report
// and the one read before it from the same job. Pure: no sockets, files or clocks. Read in
// bounded memory and in time linear in the bytes: a report is untrusted input (a hostile or
// broken server, a saved file).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ncclguard::core {

// A report longer than this is cut here (RasReport::truncated): 4,096 ranks' verbose text is
// under 1 MiB.
inline constexpr std::size_t kMaxRasReportBytes = 4 << 20;
// Processes or ranks kept per list of a report (the count goes on).
inline constexpr std::size_t kMaxRasEntries = 256;
// Reports a RasReader keeps before the oldest are dropped (a saved loop of queries).
inline constexpr std::size_t kMaxRasReports = 64;

enum class RasFormat { Text, JSON };

// A process or rank a report names. Text: "Rank %d -- GPU %s managed by process %d on node %s",
// "Process %d on node %s managing GPU(s) %s"; JSON: a "ranks"/"missing_ranks" item.
struct RasProcess {
  std::optional<int> rank;   // none when RAS names a process, not a rank
  std::string gpu;           // "5", "0,1" (CUDA device numbers as RAS prints them)
  std::int64_t pid = 0;      // the container's PID
  std::string node;          // the process's bootstrap address (in Kubernetes its pod's IP)
  std::string communicator;  // the communicator's hash, 16 hex digits ("27a079b828ff1a75"), "" for
                             // a job-wide line (the "#0-0" before it is not stable across reports)
  std::string detail;        // what RAS says of it: "considered dead", "launched up to operation
                             // 6649 of AllReduce", "reported ncclSystemError"
  friend bool operator==(const RasProcess&, const RasProcess&) = default;
};

// Ranks of one communicator whose counts of one collective differ (text: "Communicator ranks
// have different [AllReduce ]collective operation counts" and its "N ranks have launched up to
// operation X" groups; JSON: the ranks' collective_counts).
struct RasMismatch {
  std::string communicator;  // its hash, as RasProcess::communicator
  std::string collective;    // "AllReduce"; "" before 2.26 (one count for all)
  // (ranks, operation) per group, highest operation first; at most kMaxRasEntries (the highest).
  std::vector<std::pair<std::int64_t, std::int64_t>> groups;
  std::vector<RasProcess> behind;  // the ranks below the highest count that RAS named
  friend bool operator==(const RasMismatch&, const RasMismatch&) = default;
};

struct RasReport {
  RasFormat format = RasFormat::Text;
  std::string nccl_version;  // "2.26.5", "" when the report does not say
  // Job summary (text) / the ranks seen (JSON); -1 when not said.
  std::int64_t nodes = -1;
  std::int64_t processes = -1;
  std::int64_t gpus = -1;
  std::int64_t communicators = -1;
  std::vector<RasProcess> dead;          // DEAD: unreachable via the RAS network for 60 s
  std::vector<RasProcess> unresponsive;  // INCOMPLETE: processes and ranks that sent no data
  std::vector<RasProcess> errors;        // ERROR: ranks that reported an init or async error
  std::vector<RasMismatch> mismatches;   // MISMATCH of collective counts
  // How many processes DEAD and INCOMPLETE count ("1 job process is considered dead", "Missing
  // communicator data from 12 job processes"): STATUS names them only when they are few.
  std::int64_t dead_count = 0;
  std::int64_t unresponsive_count = 0;
  std::int64_t timeouts = 0;  // TIMEOUT: communication timeouts while gathering
  bool truncated = false;     // cut at kMaxRasReportBytes, or ended before the report did
  bool empty() const {
    return dead.empty() && unresponsive.empty() && errors.empty() && mismatches.empty() &&
           dead_count == 0 && unresponsive_count == 0;
  }
};

// Reads reports line by line (a saved file, a server's answer), in any mix of the two formats
// and of other lines (an `OK` that SET FORMAT left, a shell prompt, log lines): a text report
// starts at "NCCL version ... compiled with CUDA ..." or at "Job summary"; a JSON report is a
// top-level object that holds "nccl_version" or "communicators". Bounded: kMaxRasReportBytes a
// report, kMaxRasEntries a list, kMaxRasReports reports kept (the newest).
class RasReader {
 public:
  RasReader();
  ~RasReader();
  RasReader(RasReader&&) noexcept;
  RasReader& operator=(RasReader&&) noexcept;
  // One line, without its end; true when it starts a report (one Finish may drop: a JSON object
  // that turns out not to be RAS's).
  bool Feed(std::string_view line);
  // Ends the stream (a report cut short is kept, marked truncated) and hands the reports over.
  std::vector<RasReport> Finish();
  // The 1-based line each report returned by Finish started on.
  const std::vector<std::uint64_t>& StartLines() const;

 private:
  struct State;
  State* state_;
};

// The reports in a whole answer or file (lines split at \n, \r\n).
std::vector<RasReport> ReadRasReports(std::string_view bytes);

// What ncclguard says of a job from its newest report and the one before it.
enum class RasHealth {
  Healthy,           // every process answered, no error; a mismatch that moves is a straggler
  ProcessDead,       // RAS considers a process dead
  RankError,         // a rank reported an error
  CollectiveStuck,   // the same mismatch of collective counts in two reports in a row
  RankUnresponsive,  // processes or ranks sent no data (not yet dead)
};
// "Healthy", "ProcessDead", ...: the NcclHealth condition's reason.
std::string_view RasHealthName(RasHealth health);
std::optional<RasHealth> RasHealthFromName(std::string_view name);

struct RasVerdict {
  RasHealth health = RasHealth::Healthy;
  // The processes or ranks it is about (at most kMaxRasVerdictRanks), the worst first.
  std::vector<RasProcess> ranks;
  // One sentence of what RAS said, naming ranks by rank, GPU, PID and address (no pod names:
  // the controller maps the addresses).
  std::string summary;
  // A straggler: a mismatch whose counts moved since the previous report (Healthy).
  bool straggler = false;
};
inline constexpr std::size_t kMaxRasVerdictRanks = 8;

// `previous`: the report read before `report` from the same job, nullptr for its first.
RasVerdict JudgeRas(const RasReport& report, const RasReport* previous);

}  // namespace ncclguard::core
