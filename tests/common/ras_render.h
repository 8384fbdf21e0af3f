// Test-only renderer of NCCL's RAS reports: from a scenario (communicators, their ranks, which
// processes are unresponsive or dead, errors, collective counts), the bytes the RAS service of an
// NCCL process sends for STATUS / VERBOSE STATUS, text in the layouts of 2.24, 2.26 and 2.28, and
// the JSON of `SET FORMAT json` (2.28.7 and later). Written by us from the format strings and the
// grouping rules of NCCL's src/ras/client_support.cc (rasClientRunInit, rasClientRunComms,
// rasClientBreakDownErrors, rasDumpCommsToJSON), so that ncclguard's reader is tested against
// what NCCL prints, not against what we think it prints. Where it simplifies, ras_render.cpp says
// so at the place.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ncclguard::ras_fake {

// The collectives NCCL counts per rank, in its order (ncclFunc_t).
inline constexpr std::array<std::string_view, 5> kRasCollectives = {
    "Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};

// One rank of a communicator. A process is the pair (node, pid): its GPUs are the ranks' gpus,
// and it is unresponsive or dead when any of its ranks says so.
struct RasRankSpec {
  int rank = 0;
  int gpu = 0;                        // CUDA device
  int nvml = -1;                      // NVML device; -1: the same as gpu
  long pid = 0;                       // the process's PID
  std::string node;                   // the process's address (IPv4 or IPv6), as RAS prints it
  std::array<long long, 5> counts{};  // per kRasCollectives; 2.24 prints their sum
  int init_state = 0;                 // ncclResult_t: 0 ncclSuccess, 7 ncclInProgress, 1-6 an error
  int async_error = 0;                // ncclResult_t, as ncclCommGetAsyncError returns it
  bool missing = false;               // its process sent no data (unresponsive, not yet dead)
  bool dead = false;                  // its process is considered dead (unreachable for 60 s)
};

struct RasCommSpec {
  std::uint64_t hash = 0;
  std::uint64_t host_hash = 0;  // JSON's secondary_hash
  std::uint64_t pid_hash = 0;
  std::vector<RasRankSpec> ranks;  // every rank of the communicator, missing ones included
};

struct RasScenario {
  std::string version = "2.28";  // "2.24", "2.26", "2.28" (2.28.7-2.28.9), "2.29" (and later)
  std::string nccl_version;      // printed; "" gives 2.24.3, 2.26.5, 2.28.9, 2.29.3
  int cuda = 12080;              // compiled with (12.8), runtime and driver version
  std::vector<RasCommSpec> comms;
  int timeouts = 0;                 // communication timeouts while gathering the data
  bool verbose = true;              // VERBOSE STATUS (false: STATUS)
  double collection_seconds = 0.0;  // how long RAS took to gather the communicators' data
  std::string timestamp = "2025-06-01 12:00:00";  // JSON's, "%F %T" local time
  bool silent = false;  // for ncclguard-ras-standin: accept connections and never answer
};

// The text report, as the server sends it for (VERBOSE) STATUS before it closes the connection.
std::string RenderRasText(const RasScenario& scenario);
// The JSON report for STATUS after SET FORMAT json; 2.28 and later only (std::invalid_argument
// otherwise). "2.28" reproduces 2.28.7-2.28.9 exactly, so a missing rank's object lacks the comma
// after "nvml_dev" (invalid JSON; fixed in 2.29).
std::string RenderRasJson(const RasScenario& scenario);

// Whether the version knows SET FORMAT (2.28 and later).
bool RasVersionHasJson(std::string_view version);

// A scenario from its JSON (ncclguard-ras-standin --help says the same):
// {"version":"2.26","verbose":true,"timeouts":0,"silent":false,"comms":[{"hash":"0x27a0...",
//  "ranks":[{"rank":0,"gpu":0,"pid":1,"node":"10.0.0.5","counts":[0,0,0,0,100],
//  "init_state":0,"async_error":0,"missing":false,"dead":false}]}]}
// Throws std::invalid_argument with the path of a wrong field.
RasScenario ParseRasScenario(std::string_view json);

}  // namespace ncclguard::ras_fake
