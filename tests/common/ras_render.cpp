// The RAS report renderer (ras_render.h). The layout, the grouping and the outlier rules follow
// NCCL's src/ras/client_support.cc of v2.24.3-1, v2.26.5-1, v2.28.9-1 and v2.29.3-1; the printf
// calls are ours, with NCCL's format strings. Simplifications, each said again where it is made:
// - every process of the scenario is a job process (rasPeers); a peer's port is its PID, so
//   peers sort by (address, PID) where NCCL sorts them by (address, port);
// - a rank with no data belongs to an unresponsive or dead process, so there is no NOCOMM /
//   UNKNOWN status (a reachable process that left the communicator) and no
//   "[process information not found]" or "[could not find information on ...]" line;
// - no communicator is finalizing or aborting (status INIT or RUNNING only);
// - equal communicators keep the scenario's order (NCCL's qsort leaves their order open);
// - a communicator none of whose ranks answered is not reported at all, as in NCCL.
#include "ras_render.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <tuple>

namespace ncclguard::ras_fake {
namespace {

// NCCL's ncclResult_t values RAS tells apart.
constexpr int kNcclSuccess = 0;
constexpr int kNcclInProgress = 7;
constexpr int kNcclNumResults = 8;

// RAS_ACS_* (the communicator status bits) and RAS_ACE_* (its errors).
constexpr unsigned kStatusInit = 2;
constexpr unsigned kStatusRunning = 4;
constexpr unsigned kErrorMismatch = 1;
constexpr unsigned kErrorError = 2;
constexpr unsigned kErrorIncomplete = 4;

// RAS_CLIENT_DETAIL_THRESHOLD, RAS_CLIENT_OUTLIER_FRACTION, RAS_CLIENT_VERBOSE_OUTLIER_FRACTION.
constexpr long kDetailThreshold = 10;
constexpr double kOutlierFraction = 0.25;
constexpr double kVerboseOutlierFraction = 0.5;

enum class Layout { V224, V226, V228 };

struct Version {
  int minor = 0;
  Layout layout = Layout::V228;
};

Version ParseVersion(std::string_view text) {
  int major = 0;
  int minor = 0;
  const std::string copy(text);
  if (std::sscanf(copy.c_str(), "%d.%d", &major, &minor) != 2 || major != 2 || minor < 24) {
    throw std::invalid_argument("RAS scenario: version \"" + copy +
                                "\" is not 2.24 or later (\"2.24\", \"2.26\", \"2.28\")");
  }
  Version version;
  version.minor = minor;
  version.layout = minor < 26 ? Layout::V224 : minor < 28 ? Layout::V226 : Layout::V228;
  return version;
}

std::string DefaultNcclVersion(const Version& version) {
  switch (version.minor) {
    case 24:
    case 25:
      return "2.24.3";
    case 26:
    case 27:
      return "2.26.5";
    case 28:
      return "2.28.9";
    case 29:
      return "2.29.3";
    default:
      return "2." + std::to_string(version.minor) + ".1";
  }
}

__attribute__((format(printf, 2, 3))) void Append(std::string& out, const char* format, ...) {
  va_list arguments;
  va_start(arguments, format);
  va_list copy;
  va_copy(copy, arguments);
  const int needed = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  if (needed > 0) {
    const std::size_t start = out.size();
    out.resize(start + static_cast<std::size_t>(needed) + 1);
    std::vsnprintf(out.data() + start, static_cast<std::size_t>(needed) + 1, format, arguments);
    out.resize(start + static_cast<std::size_t>(needed));
  }
  va_end(arguments);
}

// NCCL's rasCountIsOutlier: whether the members of a group of `count` get a line each.
bool IsOutlier(long count, bool verbose, long total = -1) {
  if (count == 1) return true;
  if (verbose) {
    return total != -1
               ? static_cast<double>(count) < static_cast<double>(total) * kVerboseOutlierFraction
               : true;
  }
  return count <= kDetailThreshold &&
         (total == -1 ||
          static_cast<double>(count) <= static_cast<double>(total) * kOutlierFraction);
}

const char* ErrorString(int error) {
  switch (error) {
    case 1:
      return "Unhandled CUDA error";
    case 2:
      return "System error";
    case 3:
      return "Internal error";
    case 4:
      return "Invalid argument";
    case 5:
      return "Invalid usage";
    case 6:
      return "Remote process error";
    case 7:
      return "NCCL operation in progress";
    default:
      return "Unexpected error";
  }
}

int PopCount(std::uint64_t mask) { return __builtin_popcountll(mask); }

// A job process (NCCL's rasPeerInfo): its address, PID, GPUs and whether it answered.
struct Process {
  std::string node;
  int family = 0;  // AF_INET, AF_INET6; 255 for an address inet_pton does not read (sorts last)
  std::array<unsigned char, 16> address{};
  long pid = 0;
  std::uint64_t cuda_devices = 0;
  std::uint64_t nvml_devices = 0;
  bool missing = false;
  bool dead = false;
  bool Responded() const { return !missing && !dead; }
};

// ncclSocketsHostCompare: the address without the port.
int CompareHosts(const Process& a, const Process& b) {
  if (a.family != b.family) return a.family < b.family ? -1 : 1;
  if (a.family == 255) return a.node.compare(b.node) < 0 ? -1 : a.node == b.node ? 0 : 1;
  const int cmp = std::memcmp(a.address.data(), b.address.data(), a.address.size());
  return cmp < 0 ? -1 : cmp > 0 ? 1 : 0;
}

bool SameNode(const Process& a, const Process& b) { return CompareHosts(a, b) == 0; }

// The address then the PID: rasPeers' order (by address and port), the port being the PID here.
bool PeerLess(const Process& a, const Process& b) {
  const int cmp = CompareHosts(a, b);
  return cmp != 0 ? cmp < 0 : a.pid < b.pid;
}

std::string GpuMaskString(std::uint64_t cuda, std::uint64_t nvml) {
  std::string out;
  bool first = true;
  for (int i = 0; i < 64; ++i) {
    if (cuda & (1ULL << i)) {
      Append(out, "%s%d", first ? "" : ",", i);
      first = false;
    }
  }
  if (cuda != nvml) {
    out += " (NVML ";
    first = true;
    for (int i = 0; i < 64; ++i) {
      if (nvml & (1ULL << i)) {
        Append(out, "%s%d", first ? "" : ",", i);
        first = false;
      }
    }
    out += ")";
  }
  return out;
}

int NvmlOf(const RasRankSpec& rank) { return rank.nvml < 0 ? rank.gpu : rank.nvml; }

std::string RankGpuString(const RasRankSpec& rank) {
  std::string out;
  Append(out, "%d", rank.gpu);
  if (NvmlOf(rank) != rank.gpu) Append(out, " (NVML %d)", NvmlOf(rank));
  return out;
}

// A rank as RAS holds it: its spec and its process (an index into the sorted peers).
struct Rank {
  const RasRankSpec* spec = nullptr;
  int peer = 0;
};

// One reported communicator with what rasClientRunComms works out of it (rasAuxComm).
struct Comm {
  const RasCommSpec* spec = nullptr;
  std::vector<Rank> ranks;    // those with data, by rank (comm->ranks)
  std::vector<Rank> missing;  // those without, by rank (2.26's missingRanks)
  int comm_ranks = 0;         // commNRanks
  int peers = 0;
  int nodes = 0;
  int ranks_per_node_min = 0;
  int ranks_per_node_max = 0;
  unsigned status = 0;
  unsigned errors = 0;
  int incomplete_ranks = 0;
};

int TopBit(unsigned status) { return 31 - __builtin_clz(status); }

// The job as RAS sees it: the processes sorted as rasPeers, the communicators that were reported.
struct Job {
  Version version;
  std::vector<Process> peers;
  std::vector<Comm> comms;
  int missing_peers = 0;  // nPeersMissing
  int dead_peers = 0;     // nRasDeadPeers
};

long long Sum(const std::array<long long, 5>& counts) {
  long long sum = 0;
  for (const long long count : counts) sum += count;
  return sum;
}

// 2.24 has one collective operation count a rank; we print the sum of the scenario's five.
std::vector<long long> CountsOf(const RasRankSpec& rank, Layout layout) {
  if (layout == Layout::V224) return {Sum(rank.counts)};
  return {rank.counts.begin(), rank.counts.end()};
}

void Validate(const RasScenario& scenario) {
  for (const RasCommSpec& comm : scenario.comms) {
    for (const RasRankSpec& rank : comm.ranks) {
      const std::string where = "RAS scenario: communicator " + std::to_string(comm.hash) +
                                " rank " + std::to_string(rank.rank) + ": ";
      if (rank.gpu < 0 || rank.gpu > 63 || NvmlOf(rank) > 63) {
        throw std::invalid_argument(where + "gpu and nvml must be 0-63");
      }
      if (rank.init_state < 0 || rank.init_state >= kNcclNumResults || rank.async_error < 0 ||
          rank.async_error >= kNcclNumResults) {
        throw std::invalid_argument(where + "init_state and async_error must be 0-7");
      }
      for (const long long count : rank.counts) {
        if (count < 0) throw std::invalid_argument(where + "counts must not be negative");
      }
    }
  }
}

Job BuildJob(const RasScenario& scenario) {
  Validate(scenario);
  Job job;
  job.version = ParseVersion(scenario.version);
  std::map<std::pair<std::string, long>, Process> by_key;
  for (const RasCommSpec& comm : scenario.comms) {
    for (const RasRankSpec& rank : comm.ranks) {
      Process& process = by_key[{rank.node, rank.pid}];
      if (process.node.empty()) {
        process.node = rank.node;
        process.pid = rank.pid;
        if (inet_pton(AF_INET, rank.node.c_str(), process.address.data()) == 1) {
          process.family = AF_INET;
        } else if (inet_pton(AF_INET6, rank.node.c_str(), process.address.data()) == 1) {
          process.family = AF_INET6;
        } else {
          process.family = 255;
        }
      }
      process.cuda_devices |= 1ULL << rank.gpu;
      process.nvml_devices |= 1ULL << NvmlOf(rank);
      process.missing = process.missing || rank.missing;
      process.dead = process.dead || rank.dead;
    }
  }
  for (auto& [key, process] : by_key) {
    if (process.dead) process.missing = false;  // dead is what RAS says once it gives up
    job.peers.push_back(process);
  }
  std::sort(job.peers.begin(), job.peers.end(), PeerLess);
  for (const Process& process : job.peers) {
    job.missing_peers += process.missing ? 1 : 0;
    job.dead_peers += process.dead ? 1 : 0;
  }
  std::map<std::pair<std::string, long>, int> peer_index;
  for (std::size_t i = 0; i < job.peers.size(); ++i) {
    peer_index[{job.peers[i].node, job.peers[i].pid}] = static_cast<int>(i);
  }
  auto peer_of = [&](const RasRankSpec& rank) { return peer_index.at({rank.node, rank.pid}); };

  for (const RasCommSpec& spec : scenario.comms) {
    Comm comm;
    comm.spec = &spec;
    comm.comm_ranks = static_cast<int>(spec.ranks.size());
    for (const RasRankSpec& rank : spec.ranks) {
      const Rank entry{&rank, peer_of(rank)};
      (job.peers[static_cast<std::size_t>(entry.peer)].Responded() ? comm.ranks : comm.missing)
          .push_back(entry);
    }
    if (comm.ranks.empty()) continue;  // nobody reported it: RAS does not know it
    auto by_rank = [](const Rank& a, const Rank& b) { return a.spec->rank < b.spec->rank; };
    std::stable_sort(comm.ranks.begin(), comm.ranks.end(), by_rank);
    std::stable_sort(comm.missing.begin(), comm.missing.end(), by_rank);

    // Every missing rank belongs to a process that sent nothing: INCOMPLETE, never NOCOMM.
    if (!comm.missing.empty()) {
      comm.errors |= kErrorIncomplete;
      comm.incomplete_ranks = static_cast<int>(comm.missing.size());
    }

    // By process (and node), then rank: to count processes, nodes and ranks per node.
    std::vector<Rank> by_peer = comm.ranks;
    std::stable_sort(by_peer.begin(), by_peer.end(),
                     [](const Rank& a, const Rank& b) { return a.peer < b.peer; });
    const std::vector<long long> first_counts = CountsOf(*by_peer.front().spec, job.version.layout);
    int node_ranks = 0;
    comm.ranks_per_node_min = 64;
    comm.ranks_per_node_max = 0;
    for (std::size_t i = 0; i < by_peer.size(); ++i) {
      const Rank& rank = by_peer[i];
      if (i == 0) {
        comm.peers = comm.nodes = 1;
        node_ranks = 1;
      } else {
        if (rank.peer != by_peer[i - 1].peer) {
          ++comm.peers;
          if (!SameNode(job.peers[static_cast<std::size_t>(rank.peer)],
                        job.peers[static_cast<std::size_t>(by_peer[i - 1].peer)])) {
            ++comm.nodes;
            comm.ranks_per_node_min = std::min(comm.ranks_per_node_min, node_ranks);
            comm.ranks_per_node_max = std::max(comm.ranks_per_node_max, node_ranks);
            node_ranks = 0;
          }
        }
        ++node_ranks;
      }
      if (i + 1 == by_peer.size()) {
        comm.ranks_per_node_min = std::min(comm.ranks_per_node_min, node_ranks);
        comm.ranks_per_node_max = std::max(comm.ranks_per_node_max, node_ranks);
      }
      comm.status |= rank.spec->init_state == kNcclSuccess ? kStatusRunning : kStatusInit;
      if (CountsOf(*rank.spec, job.version.layout) != first_counts) comm.errors |= kErrorMismatch;
      if (rank.spec->init_state != kNcclSuccess && rank.spec->init_state != kNcclInProgress) {
        comm.errors |= kErrorError;
      }
      if (rank.spec->async_error != kNcclSuccess && rank.spec->async_error != kNcclInProgress) {
        comm.errors |= kErrorError;
      }
    }
    if (PopCount(comm.status) > 1) comm.errors |= kErrorMismatch;
    job.comms.push_back(std::move(comm));
  }

  // rasAuxCommsCompareRev: the largest first, then more nodes, a later status, more errors,
  // fewer ranks with data. Stable where NCCL's qsort leaves equal communicators in any order.
  std::stable_sort(job.comms.begin(), job.comms.end(), [](const Comm& a, const Comm& b) {
    const auto key = [](const Comm& c) {
      return std::make_tuple(-c.comm_ranks, -c.nodes, -TopBit(c.status),
                             -static_cast<int>(c.errors), static_cast<int>(c.ranks.size()));
    };
    return key(a) < key(b);
  });
  return job;
}

// Communicator groups of the summary table: (first index, count).
std::vector<std::pair<std::size_t, std::size_t>> GroupComms(const std::vector<Comm>& comms) {
  std::vector<std::pair<std::size_t, std::size_t>> groups;
  for (std::size_t i = 0; i < comms.size(); ++i) {
    if (i == 0 || comms[i].comm_ranks != comms[i - 1].comm_ranks ||
        comms[i].nodes != comms[i - 1].nodes ||
        TopBit(comms[i].status) != TopBit(comms[i - 1].status) ||
        comms[i].errors != comms[i - 1].errors) {
      groups.emplace_back(i, 1);
    } else {
      ++groups.back().second;
    }
  }
  return groups;
}

// rasValCount: a value, how many have it, where the first is.
struct ValueCount {
  long long value = 0;
  long count = 0;
  std::size_t first = 0;
};

// rasValCountsCompareRev: the most frequent first, then the larger value.
void SortByCountRev(std::vector<ValueCount>& counts) {
  std::stable_sort(counts.begin(), counts.end(), [](const ValueCount& a, const ValueCount& b) {
    return a.count != b.count ? a.count > b.count : a.value > b.value;
  });
}

void RenderJobSummary(const Job& job, bool verbose, std::string& out) {
  const std::vector<Process>& peers = job.peers;
  const int total_peers = static_cast<int>(peers.size());
  int total_gpus = 0;
  int total_nodes = 0;
  int first_gpus_node = 0;
  int first_gpus_global = 0;
  int first_peers_global = 0;
  bool consistent_gpus_node = true;
  bool consistent_gpus_global = true;
  bool consistent_peers_global = true;
  int node_peers = 0;
  for (int i = 0; i < total_peers; ++i) {
    const int gpus = PopCount(peers[static_cast<std::size_t>(i)].cuda_devices);
    total_gpus += gpus;
    if (i == 0) {
      total_nodes = 1;
      node_peers = 1;
      first_gpus_global = first_gpus_node = gpus;
    } else {
      if (gpus != first_gpus_global) consistent_gpus_global = false;
      if (!SameNode(peers[static_cast<std::size_t>(i)], peers[static_cast<std::size_t>(i - 1)])) {
        ++total_nodes;
        if (first_peers_global == 0) {
          first_peers_global = node_peers;
        } else if (node_peers != first_peers_global) {
          consistent_peers_global = false;
        }
        node_peers = 1;
        first_gpus_node = gpus;
      } else {
        if (gpus != first_gpus_node) consistent_gpus_node = false;
        ++node_peers;
      }
    }
    if (i == total_peers - 1) {
      if (first_peers_global == 0) {
        first_peers_global = node_peers;
      } else if (node_peers != first_peers_global) {
        consistent_peers_global = false;
      }
    }
  }

  Append(out,
         "Job summary\n"
         "===========\n\n");
  if (consistent_gpus_node && consistent_gpus_global && consistent_peers_global) {
    Append(out,
           "  Nodes  Processes         GPUs  Processes     GPUs\n"
           "(total)   per node  per process    (total)  (total)\n"
           "%7d  %9d  %11d  %9d  %7d\n",
           total_nodes, first_peers_global, first_gpus_global, total_peers, total_gpus);
    return;
  }

  // Processes per node, as a value of each peer; then sorted by it (the address and PID after).
  struct Aux {
    const Process* peer;
    int value;
  };
  std::vector<Aux> aux;
  for (const Process& peer : peers) aux.push_back({&peer, 0});
  for (int i = 0, first = 0, count = 0; i < total_peers; ++i) {
    if (i == 0) {
      count = 1;
      first = 0;
    } else if (!SameNode(*aux[static_cast<std::size_t>(i)].peer,
                         *aux[static_cast<std::size_t>(i - 1)].peer)) {
      for (int j = first; j < i; ++j) aux[static_cast<std::size_t>(j)].value = count;
      count = 1;
      first = i;
    } else {
      ++count;
    }
    if (i == total_peers - 1) {
      for (int j = first; j < total_peers; ++j) aux[static_cast<std::size_t>(j)].value = count;
    }
  }
  std::stable_sort(aux.begin(), aux.end(),
                   [](const Aux& a, const Aux& b) { return a.value < b.value; });
  std::vector<ValueCount> counts;
  for (std::size_t i = 0; i < aux.size();) {
    if (i == 0 || aux[i].value != aux[i - 1].value) {
      counts.push_back({aux[i].value, 1, i});
    } else {
      ++counts.back().count;
    }
    i += static_cast<std::size_t>(aux[i].value);
  }
  SortByCountRev(counts);

  if (consistent_gpus_node && consistent_gpus_global) {
    Append(out,
           "  Nodes  Processes         GPUs\n"
           "          per node  per process\n");
    for (const ValueCount& count : counts) {
      Append(out, "%7ld  %9lld  %11d\n", count.count, count.value, first_gpus_global);
    }
  } else {
    Append(out,
           "  Nodes  Processes\n"
           "          per node\n");
    for (const ValueCount& count : counts) {
      Append(out, "%7ld  %9lld\n", count.count, count.value);
    }
    std::vector<Aux> by_gpus;
    for (const Process& peer : peers) by_gpus.push_back({&peer, PopCount(peer.cuda_devices)});
    std::stable_sort(by_gpus.begin(), by_gpus.end(),
                     [](const Aux& a, const Aux& b) { return a.value < b.value; });
    std::vector<ValueCount> gpu_counts;
    for (std::size_t i = 0; i < by_gpus.size(); ++i) {
      if (i == 0 || by_gpus[i].value != by_gpus[i - 1].value) {
        gpu_counts.push_back({by_gpus[i].value, 1, i});
      } else {
        ++gpu_counts.back().count;
      }
    }
    SortByCountRev(gpu_counts);
    Append(out,
           "\n"
           "         Processes         GPUs\n"
           "                    per process\n");
    for (const ValueCount& count : gpu_counts) {
      Append(out, "         %9ld  %11lld\n", count.count, count.value);
    }
  }
  Append(out,
         "\n"
         "  Nodes  Processes         GPUs\n"
         "(total)    (total)      (total)\n"
         "%7d  %9d  %11d\n",
         total_nodes, total_peers, total_gpus);

  if (consistent_gpus_node && consistent_gpus_global) {
    for (std::size_t i = 1; i < counts.size(); ++i) {
      const ValueCount& count = counts[i];
      if (!IsOutlier(count.count, verbose, total_nodes)) continue;
      Append(out, "\nThe outlier node%s:\n", count.count > 1 ? "s" : "");
      const auto per_node = static_cast<std::size_t>(count.value);
      for (std::size_t peer = count.first; peer < count.first + per_node * count.count;
           peer += per_node) {
        // NCCL lists the PIDs of the first `value` peers of the sorted array (aux[j], not
        // aux[peer + j]) for every outlier node; reproduced as printed.
        std::string pids;
        for (std::size_t j = 0; j < per_node; ++j) {
          Append(pids, "%s%ld", j > 0 ? "," : "", aux[j].peer->pid);
        }
        Append(out, "  Node %s running process%s %s\n", aux[peer].peer->node.c_str(),
               count.value > 1 ? "es" : "", pids.c_str());
      }
    }
  }
}

void AppendRankLine(std::string& out, const Job& job, const Rank& rank) {
  const Process& peer = job.peers[static_cast<std::size_t>(rank.peer)];
  Append(out, "  Rank %d -- GPU %s managed by process %ld on node %s\n", rank.spec->rank,
         RankGpuString(*rank.spec).c_str(), peer.pid, peer.node.c_str());
}

void AppendProcessLines(std::string& out, const Job& job, bool dead) {
  for (const Process& peer : job.peers) {
    if (dead ? !peer.dead : !peer.missing) continue;
    Append(out, "  Process %ld on node %s managing GPU%s %s\n", peer.pid, peer.node.c_str(),
           PopCount(peer.cuda_devices) > 1 ? "s" : "",
           GpuMaskString(peer.cuda_devices, peer.nvml_devices).c_str());
  }
}

// rasClientBreakDownErrors: the most frequent error first.
void BreakDownErrors(std::string& out, const Job& job, const Comm& comm, bool verbose, bool async) {
  std::array<long, kNcclNumResults> errors{};
  for (const Rank& rank : comm.ranks) {
    ++errors[static_cast<std::size_t>(async ? rank.spec->async_error : rank.spec->init_state)];
  }
  for (;;) {
    long max_count = 0;
    int max_error = kNcclSuccess;
    for (int error = 1; error < kNcclInProgress; ++error) {
      if (max_count < errors[static_cast<std::size_t>(error)]) {
        max_count = errors[static_cast<std::size_t>(error)];
        max_error = error;
      }
    }
    if (max_error == kNcclSuccess) break;
    if (max_count > 1) Append(out, "  %ld ranks reported %s\n", max_count, ErrorString(max_error));
    if (IsOutlier(max_count, verbose)) {
      for (const Rank& rank : comm.ranks) {
        if ((async ? rank.spec->async_error : rank.spec->init_state) != max_error) continue;
        if (max_count > 1) {
          AppendRankLine(out, job, rank);
        } else {
          const Process& peer = job.peers[static_cast<std::size_t>(rank.peer)];
          Append(out, "  Rank %d reported %s -- GPU %s managed by process %ld on node %s\n",
                 rank.spec->rank, ErrorString(max_error), RankGpuString(*rank.spec).c_str(),
                 peer.pid, peer.node.c_str());
        }
      }
    }
    errors[static_cast<std::size_t>(max_error)] = 0;
  }
}

void RenderErrorSection(std::string& out, const Job& job, const Comm& comm, int group, int index,
                        bool verbose) {
  Append(out, "#%d-%d (%016llx) ERROR\n", group, index,
         static_cast<unsigned long long>(comm.spec->hash));
  for (const bool async : {false, true}) {
    long ok = 0;
    for (const Rank& rank : comm.ranks) {
      const int value = async ? rank.spec->async_error : rank.spec->init_state;
      ok += value == kNcclSuccess || value == kNcclInProgress ? 1 : 0;
    }
    const long failed = static_cast<long>(comm.ranks.size()) - ok;
    if (failed == 0) continue;
    Append(out,
           async ? "  Asynchronous error%s on %ld rank%s\n"
                 : "  Initialization error%s on %ld rank%s\n",
           failed > 1 ? "s" : "", failed, failed > 1 ? "s" : "");
    BreakDownErrors(out, job, comm, verbose, async);
  }
  Append(out, "\n");
}

void RenderIncompleteSection(std::string& out, const Job& job, const Comm& comm, int group,
                             int index, bool verbose) {
  const int missing = comm.incomplete_ranks;
  Append(out,
         "#%d-%d (%016llx) INCOMPLETE\n"
         "  Missing communicator data from %d rank%s\n",
         group, index, static_cast<unsigned long long>(comm.spec->hash), missing,
         missing > 1 ? "s" : "");
  if (IsOutlier(missing, verbose)) {
    if (job.version.layout == Layout::V224) {
      std::string list;
      for (std::size_t i = 0; i < comm.missing.size(); ++i) {
        Append(list, "%s%d", i == 0 ? "" : ",", comm.missing[i].spec->rank);
      }
      Append(out, "  The missing rank%s: %s\n", missing > 1 ? "s" : "", list.c_str());
    } else {
      for (const Rank& rank : comm.missing) AppendRankLine(out, job, rank);
    }
  }
  Append(out, "\n");
}

// The ranks grouped by a value (a status, a collective's count), most frequent group first; each
// group's ranks by rank.
std::vector<ValueCount> GroupRanks(std::vector<std::pair<long long, const Rank*>>& ranks) {
  std::stable_sort(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second->spec->rank < b.second->spec->rank;
  });
  std::vector<ValueCount> groups;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i == 0 || ranks[i].first != ranks[i - 1].first) {
      groups.push_back({ranks[i].first, 1, i});
    } else {
      ++groups.back().count;
    }
  }
  SortByCountRev(groups);
  return groups;
}

void RenderMismatchSection(std::string& out, const Job& job, const Comm& comm, int group, int index,
                           bool verbose) {
  const Layout layout = job.version.layout;
  Append(out, "#%d-%d (%016llx) MISMATCH\n", group, index,
         static_cast<unsigned long long>(comm.spec->hash));
  // statusStr: index 0 is UNKNOWN (2.24) / NOCOMM (2.26), never printed here (no such ranks).
  static constexpr std::array<const char*, 5> kStatusNames = {"UNKNOWN", "INIT", "RUNNING",
                                                              "FINALIZE", "ABORT"};
  if (PopCount(comm.status) > 1) {
    Append(out, "  Communicator ranks have different status\n");
    std::vector<std::pair<long long, const Rank*>> ranks;
    for (const Rank& rank : comm.ranks) {
      ranks.emplace_back(
          rank.spec->init_state == kNcclSuccess ? TopBit(kStatusRunning) : TopBit(kStatusInit),
          &rank);
    }
    for (const ValueCount& status : GroupRanks(ranks)) {
      const char* name = kStatusNames[static_cast<std::size_t>(status.value)];
      if (status.count > 1) Append(out, "  %ld ranks have status %s\n", status.count, name);
      if (!IsOutlier(status.count, verbose, comm.comm_ranks)) continue;
      for (std::size_t i = status.first; i < status.first + status.count; ++i) {
        const Rank& rank = *ranks[i].second;
        if (status.count > 1) {
          AppendRankLine(out, job, rank);
        } else {
          const Process& peer = job.peers[static_cast<std::size_t>(rank.peer)];
          Append(out, "  Rank %d has status %s -- GPU %s managed by process %ld on node %s\n",
                 rank.spec->rank, name, RankGpuString(*rank.spec).c_str(), peer.pid,
                 peer.node.c_str());
        }
      }
    }
  }

  const std::size_t collectives = layout == Layout::V224 ? 1 : kRasCollectives.size();
  for (std::size_t collective = 0; collective < collectives; ++collective) {
    std::vector<std::pair<long long, const Rank*>> ranks;
    for (const Rank& rank : comm.ranks) {
      ranks.emplace_back(CountsOf(*rank.spec, layout)[collective], &rank);
    }
    const bool inconsistent = std::any_of(ranks.begin(), ranks.end(), [&](const auto& rank) {
      return rank.first != ranks.front().first;
    });
    if (!inconsistent) continue;
    if (layout == Layout::V224) {
      Append(out, "  Communicator ranks have different collective operation counts\n");
    } else {
      Append(out, "  Communicator ranks have different %s operation counts\n",
             std::string(kRasCollectives[collective]).c_str());
    }
    for (const ValueCount& count : GroupRanks(ranks)) {
      // 2.24 says "launched up to operation 0" where 2.26 says "not launched any operations".
      const bool launched = count.value > 0 || layout == Layout::V224;
      if (count.count > 1) {
        if (launched) {
          Append(out, "  %ld ranks have launched up to operation %lld\n", count.count, count.value);
        } else {
          Append(out, "  %ld ranks have not launched any operations\n", count.count);
        }
      }
      if (!IsOutlier(count.count, verbose, comm.comm_ranks)) continue;
      for (std::size_t i = count.first; i < count.first + count.count; ++i) {
        const Rank& rank = *ranks[i].second;
        const Process& peer = job.peers[static_cast<std::size_t>(rank.peer)];
        if (count.count > 1) {
          AppendRankLine(out, job, rank);
        } else if (launched) {
          Append(out,
                 "  Rank %d has launched up to operation %lld -- GPU %s managed by process %ld "
                 "on node %s\n",
                 rank.spec->rank, count.value, RankGpuString(*rank.spec).c_str(), peer.pid,
                 peer.node.c_str());
        } else {
          Append(out,
                 "  Rank %d has not launched any operations -- GPU %s managed by process %ld "
                 "on node %s\n",
                 rank.spec->rank, RankGpuString(*rank.spec).c_str(), peer.pid, peer.node.c_str());
        }
      }
    }
    // 2.26 and later end each collective's block with a blank line, 2.24 the whole section.
    if (layout != Layout::V224) Append(out, "\n");
  }
  if (layout == Layout::V224) Append(out, "\n");
}

}  // namespace

bool RasVersionHasJson(std::string_view version) { return ParseVersion(version).minor >= 28; }

std::string RenderRasText(const RasScenario& scenario) {
  const Job job = BuildJob(scenario);
  const bool verbose = scenario.verbose;
  const std::string nccl_version =
      scenario.nccl_version.empty() ? DefaultNcclVersion(job.version) : scenario.nccl_version;
  std::string out;
  Append(out, "NCCL version %s compiled with CUDA %d.%d\n", nccl_version.c_str(),
         scenario.cuda / 1000, scenario.cuda % 1000 / 10);
  Append(out, "CUDA runtime version %d, driver version %d\n\n", scenario.cuda, scenario.cuda);
  RenderJobSummary(job, verbose, out);
  Append(out, "\nCommunicators...");
  if (job.version.layout == Layout::V228) {
    Append(out, " (%.3fs)\n=============\n\n", scenario.collection_seconds);
  } else {
    Append(out, " (%.2fs)\n=============\n\n", scenario.collection_seconds);
  }

  const auto groups = GroupComms(job.comms);
  if (!job.comms.empty()) {
    Append(out,
           "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
           "    #  in group  per comm  per node  per comm  in group\n");
  } else {
    Append(out, "No communicator data collected!\n");
  }
  static constexpr std::array<const char*, 5> kStatusNames224 = {"UNKNOWN", "INIT", "RUNNING",
                                                                 "FINALIZE", "ABORT"};
  static constexpr std::array<const char*, 5> kStatusNames226 = {"NOCOMM", "INIT", "RUNNING",
                                                                 "FINALIZE", "ABORT"};
  static constexpr std::array<const char*, 8> kErrorNames = {"OK",
                                                             "MISMATCH",
                                                             "ERROR",
                                                             "ERROR,MISMATCH",
                                                             "INCOMPLETE",
                                                             "INCOMPLETE,MISMATCH",
                                                             "INCOMPLETE,ERROR",
                                                             "INCOMPLETE,ERROR,MISMATCH"};
  for (std::size_t group = 0; group < groups.size(); ++group) {
    const auto [first, count] = groups[group];
    int per_node_min = 64;
    int per_node_max = 0;
    std::vector<std::uint64_t> peer_devices(job.peers.size());
    for (std::size_t i = first; i < first + count; ++i) {
      per_node_min = std::min(per_node_min, job.comms[i].ranks_per_node_min);
      per_node_max = std::max(per_node_max, job.comms[i].ranks_per_node_max);
      for (const Rank& rank : job.comms[i].ranks) {
        peer_devices[static_cast<std::size_t>(rank.peer)] |= 1ULL << NvmlOf(*rank.spec);
      }
    }
    int ranks_total = 0;
    for (const std::uint64_t devices : peer_devices) ranks_total += PopCount(devices);
    std::string per_node;
    if (per_node_min == per_node_max) {
      Append(per_node, "%d", per_node_min);
    } else {
      Append(per_node, "%d-%d", per_node_min, per_node_max);
    }
    const Comm& comm = job.comms[first];
    const auto status = static_cast<std::size_t>(TopBit(comm.status));
    Append(out, "%5d  %8d  %8d  %8s  %8d  %8d  %8s  %6s\n", static_cast<int>(group),
           static_cast<int>(count), comm.nodes, per_node.c_str(), comm.comm_ranks, ranks_total,
           job.version.layout == Layout::V224 ? kStatusNames224[status] : kStatusNames226[status],
           kErrorNames[comm.errors]);
  }

  Append(out,
         "\nErrors\n"
         "======\n\n");
  if (job.missing_peers > 0) {
    Append(out,
           "INCOMPLETE\n"
           "  Missing communicator data from %d job process%s\n",
           job.missing_peers, job.missing_peers > 1 ? "es" : "");
    if (IsOutlier(job.missing_peers, verbose)) AppendProcessLines(out, job, /*dead=*/false);
    Append(out, "\n");
  }
  if (job.dead_peers > 0) {
    Append(out,
           "DEAD\n"
           "  %d job process%s considered dead (unreachable via the RAS network)\n",
           job.dead_peers, job.dead_peers > 1 ? "es are" : " is");
    if (IsOutlier(job.dead_peers, verbose)) AppendProcessLines(out, job, /*dead=*/true);
    Append(out, "\n");
  }
  for (std::size_t group = 0; group < groups.size(); ++group) {
    const auto [first, count] = groups[group];
    for (std::size_t i = first; i < first + count; ++i) {
      const Comm& comm = job.comms[i];
      const int g = static_cast<int>(group);
      const int index = static_cast<int>(i - first);
      if (comm.errors & kErrorIncomplete)
        RenderIncompleteSection(out, job, comm, g, index, verbose);
      if (comm.errors & kErrorError) RenderErrorSection(out, job, comm, g, index, verbose);
    }
  }

  Append(out,
         "Warnings\n"
         "========\n\n");
  if (scenario.timeouts > 0) {
    Append(out,
           "TIMEOUT\n"
           "  Encountered %d communication timeout%s while gathering communicator data\n\n",
           scenario.timeouts, scenario.timeouts > 1 ? "s" : "");
  }
  for (std::size_t group = 0; group < groups.size(); ++group) {
    const auto [first, count] = groups[group];
    for (std::size_t i = first; i < first + count; ++i) {
      if (job.comms[i].errors & kErrorMismatch) {
        RenderMismatchSection(out, job, job.comms[i], static_cast<int>(group),
                              static_cast<int>(i - first), verbose);
      }
    }
  }
  return out;
}

std::string RenderRasJson(const RasScenario& scenario) {
  const Job job = BuildJob(scenario);
  if (job.version.minor < 28) {
    throw std::invalid_argument("RAS scenario: version " + scenario.version +
                                " has no JSON format (2.28.7 and later)");
  }
  const std::string nccl_version =
      scenario.nccl_version.empty() ? DefaultNcclVersion(job.version) : scenario.nccl_version;
  // The communicators in the order they were gathered (the scenario's), unlike the text's.
  std::vector<const Comm*> comms;
  for (const RasCommSpec& spec : scenario.comms) {
    for (const Comm& comm : job.comms) {
      if (comm.spec == &spec) comms.push_back(&comm);
    }
  }
  std::string out;
  Append(out, "{\n");
  Append(out, "  \"nccl_version\": \"%s\",\n", nccl_version.c_str());
  Append(out, "  \"cuda_runtime_version\": %d,\n", scenario.cuda);
  Append(out, "  \"cuda_driver_version\": %d,\n", scenario.cuda);
  Append(out, "  \"timestamp\": \"%s\",\n", scenario.timestamp.c_str());
  Append(out, "  \"communicators_count\": %d,\n", static_cast<int>(comms.size()));
  Append(out, "  \"communicators\": [\n");
  for (std::size_t c = 0; c < comms.size(); ++c) {
    const Comm& comm = *comms[c];
    if (c > 0) Append(out, ",\n");
    Append(out, "    {\n");
    Append(out, "      \"hash\": \"0x%llx\",\n", static_cast<unsigned long long>(comm.spec->hash));
    Append(out, "      \"secondary_hash\": \"0x%llx:0x%llx\",\n",
           static_cast<unsigned long long>(comm.spec->host_hash),
           static_cast<unsigned long long>(comm.spec->pid_hash));
    Append(out, "      \"size\": %d,\n", comm.comm_ranks);
    Append(out, "      \"ranks_count\": %d,\n", static_cast<int>(comm.ranks.size()));
    Append(out, "      \"missing_ranks_count\": %d,\n", static_cast<int>(comm.missing.size()));
    Append(out, "      \"ranks\": [\n");
    for (std::size_t r = 0; r < comm.ranks.size(); ++r) {
      const RasRankSpec& rank = *comm.ranks[r].spec;
      const Process& peer = job.peers[static_cast<std::size_t>(comm.ranks[r].peer)];
      if (r > 0) Append(out, ",\n");
      Append(out, "        {\n");
      Append(out, "          \"rank\": %d,\n", rank.rank);
      Append(out, "          \"host\": \"%s\",\n", peer.node.c_str());
      Append(out, "          \"pid\": %d,\n", static_cast<int>(peer.pid));
      Append(out, "          \"cuda_dev\": %d,\n", rank.gpu);
      Append(out, "          \"nvml_dev\": %d,\n", NvmlOf(rank));
      Append(out, "          \"status\": {\n");
      Append(out, "            \"init_state\": %d,\n", rank.init_state);
      Append(out, "            \"async_error\": %d,\n", rank.async_error);
      Append(out, "            \"finalize_called\": %s,\n", "false");
      Append(out, "            \"destroy_flag\": %s,\n", "false");
      Append(out, "            \"abort_flag\": %s\n", "false");
      Append(out, "          },\n");
      Append(out, "          \"collective_counts\": {\n");
      for (std::size_t op = 0; op < kRasCollectives.size(); ++op) {
        Append(out, "            \"%s\": %llu", std::string(kRasCollectives[op]).c_str(),
               static_cast<unsigned long long>(rank.counts[op]));
        if (op + 1 < kRasCollectives.size()) Append(out, ",");
        Append(out, "\n");
      }
      Append(out, "          }\n");
      Append(out, "        }");
    }
    Append(out,
           "\n"
           "      ],\n");
    Append(out, "      \"missing_ranks\": [\n");
    for (std::size_t r = 0; r < comm.missing.size(); ++r) {
      const RasRankSpec& rank = *comm.missing[r].spec;
      const Process& peer = job.peers[static_cast<std::size_t>(comm.missing[r].peer)];
      if (r > 0) Append(out, ",\n");
      Append(out, "        {\n");
      Append(out, "          \"rank\": %d,\n", rank.rank);
      Append(out, "          \"host\": \"%s\",\n", peer.node.c_str());
      Append(out, "          \"pid\": %d,\n", static_cast<int>(peer.pid));
      Append(out, "          \"cuda_dev\": %d,\n", rank.gpu);
      // 2.28.7-2.28.9 print no comma here (invalid JSON); 2.29 added it.
      if (job.version.minor == 28) {
        Append(out, "          \"nvml_dev\": %d\n", NvmlOf(rank));
      } else {
        Append(out, "          \"nvml_dev\": %d,\n", NvmlOf(rank));
      }
      Append(out, "          \"status\": {\n");
      // Every missing rank's process sent nothing, so it is unresponsive, dead or not.
      Append(out, "            \"unresponsive\": %s,\n", "true");
      Append(out, "            \"considered_dead\": %s\n", peer.dead ? "true" : "false");
      Append(out, "          }\n");
      Append(out, "        }");
    }
    Append(out, "\n      ]\n");
    Append(out, "    }");
  }
  Append(out, "\n  ],\n");
  Append(out, "  \"ras\": {\n");
  Append(out, "    \"collection_time_sec\": %.3f,\n", scenario.collection_seconds);
  Append(out, "    \"timeouts_count\": %d\n", scenario.timeouts);
  Append(out, "  }\n");
  Append(out, "}\n");
  return out;
}

namespace {

std::uint64_t ParseHash(const nlohmann::json& value, const std::string& where) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_string()) {
    std::string text = value.get<std::string>();
    if (text.rfind("0x", 0) == 0 || text.rfind("0X", 0) == 0) text = text.substr(2);
    std::size_t used = 0;
    try {
      const std::uint64_t hash = std::stoull(text, &used, 16);
      if (used == text.size() && !text.empty()) return hash;
    } catch (const std::exception&) {
    }
  }
  throw std::invalid_argument("RAS scenario: " + where + ": a hash is a hex string or a number");
}

template <typename T>
void Read(const nlohmann::json& object, const char* key, T& field, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end()) return;
  try {
    field = it->get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument("RAS scenario: " + where + "." + key + ": " + e.what());
  }
}

}  // namespace

RasScenario ParseRasScenario(std::string_view text) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("RAS scenario: not JSON: ") + e.what());
  }
  if (!root.is_object()) throw std::invalid_argument("RAS scenario: not a JSON object");
  RasScenario scenario;
  Read(root, "version", scenario.version, "$");
  Read(root, "nccl_version", scenario.nccl_version, "$");
  Read(root, "cuda", scenario.cuda, "$");
  Read(root, "timeouts", scenario.timeouts, "$");
  Read(root, "verbose", scenario.verbose, "$");
  Read(root, "collection_seconds", scenario.collection_seconds, "$");
  Read(root, "timestamp", scenario.timestamp, "$");
  Read(root, "silent", scenario.silent, "$");
  ParseVersion(scenario.version);
  const auto comms = root.find("comms");
  if (comms != root.end()) {
    if (!comms->is_array()) throw std::invalid_argument("RAS scenario: $.comms: not an array");
    for (std::size_t c = 0; c < comms->size(); ++c) {
      const nlohmann::json& item = (*comms)[c];
      const std::string where = "$.comms[" + std::to_string(c) + "]";
      if (!item.is_object())
        throw std::invalid_argument("RAS scenario: " + where + ": not an object");
      RasCommSpec comm;
      if (item.contains("hash")) comm.hash = ParseHash(item["hash"], where + ".hash");
      comm.host_hash = comm.hash ^ 0x5bd1e995a5a5a5a5ULL;
      comm.pid_hash = comm.hash * 31 + 7;
      if (item.contains("host_hash")) comm.host_hash = ParseHash(item["host_hash"], where);
      if (item.contains("pid_hash")) comm.pid_hash = ParseHash(item["pid_hash"], where);
      const auto ranks = item.find("ranks");
      if (ranks == item.end() || !ranks->is_array()) {
        throw std::invalid_argument("RAS scenario: " + where + ".ranks: not an array");
      }
      for (std::size_t r = 0; r < ranks->size(); ++r) {
        const nlohmann::json& rank_item = (*ranks)[r];
        const std::string rank_where = where + ".ranks[" + std::to_string(r) + "]";
        if (!rank_item.is_object()) {
          throw std::invalid_argument("RAS scenario: " + rank_where + ": not an object");
        }
        RasRankSpec rank;
        rank.rank = static_cast<int>(r);
        Read(rank_item, "rank", rank.rank, rank_where);
        Read(rank_item, "gpu", rank.gpu, rank_where);
        Read(rank_item, "nvml", rank.nvml, rank_where);
        Read(rank_item, "pid", rank.pid, rank_where);
        Read(rank_item, "node", rank.node, rank_where);
        Read(rank_item, "counts", rank.counts, rank_where);
        Read(rank_item, "init_state", rank.init_state, rank_where);
        Read(rank_item, "async_error", rank.async_error, rank_where);
        Read(rank_item, "missing", rank.missing, rank_where);
        Read(rank_item, "dead", rank.dead, rank_where);
        comm.ranks.push_back(std::move(rank));
      }
      scenario.comms.push_back(std::move(comm));
    }
  }
  Validate(scenario);
  return scenario;
}

}  // namespace ncclguard::ras_fake
