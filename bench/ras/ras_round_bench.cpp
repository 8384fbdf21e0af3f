// What reading NCCL's RAS of its node's jobs costs the probe (probes/ras_watch.h): one
// RasWatcher::Round() over N reader pods (1, 10, 100 jobs), each pod's RAS a real
// ncclguard-ras-standin process on 127.0.0.1 with a job of R ranks (16, 256; 8 ranks a process),
// healthy or with one straggling rank (its AllReduce count one behind, moving: rank lines in
// every report). The pods come from a fake RasDirectory, their processes from a fake /proc (each
// pod's ns/net a link to this process's own namespace, so every query still enters a namespace:
// root only), status.ras is kept in memory. Between rounds every scenario's collective counts move
// on, as a running job's do. Per round: wall time, the process's CPU time, RAS queries answered,
// report bytes read, status.ras bytes written (0: nothing changed, nothing written); per row, the
// peak RSS after its rounds and how much the resident set grew over them. ROUNDS rounds a row
// (default 5), then the medians.
// Usage: ncclguard_ras_round_bench STANDIN_PATH [ROUNDS]
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/sinks/basic_file_sink.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "log/log.h"
#include "probes/netns.h"
#include "probes/ras_watch.h"
#include "probes/report.h"

namespace {

using ncclguard::core::Json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

volatile sig_atomic_t g_interrupted = 0;

void OnSignal(int) { g_interrupted = 1; }

void ThrowIfInterrupted() {
  if (g_interrupted != 0) throw std::runtime_error("interrupted");
}

// A directory of its own under TMPDIR, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "ncclguard-ras-bench-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp " + pattern + ": " + std::strerror(errno));
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void WriteFile(const fs::path& path, const std::string& text) {
  const fs::path partial = path.string() + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) throw std::runtime_error("writing " + partial.string());
  }
  fs::rename(partial, path);  // the stand-in reads the file again for every query: never half
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// ncclguard-ras-standin processes, each stopped by its pid when this goes (error paths included);
// each also gets SIGTERM should this process die first (PR_SET_PDEATHSIG).
class StandIns {
 public:
  explicit StandIns(std::string program) : program_(std::move(program)) {}
  ~StandIns() { StopAll(); }
  StandIns(const StandIns&) = delete;
  StandIns& operator=(const StandIns&) = delete;

  // Starts one on 127.0.0.1, a port the kernel picks, and returns that port (from its log).
  std::uint16_t Start(const fs::path& scenario, const fs::path& log) {
    const std::string scenario_arg = scenario.string();
    const std::string log_path = log.string();
    std::vector<const char*> argv = {program_.c_str(), "--scenario", scenario_arg.c_str(),
                                     "--port",         "0",          "--address",
                                     "127.0.0.1",      nullptr};
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(127);
      const int err = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      const int null = open("/dev/null", O_RDWR | O_CLOEXEC);
      if (err < 0 || null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(err, 2) < 0) {
        _exit(127);
      }
      execv(argv[0], const_cast<char* const*>(argv.data()));
      _exit(127);
    }
    pids_.push_back(pid);
    // "ncclguard-ras-standin: listening on 127.0.0.1:PORT, scenario ..."
    const std::string marker = "listening on 127.0.0.1:";
    for (const auto until = std::chrono::steady_clock::now() + 10s;
         std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(2ms)) {
      const std::string text = ReadFile(log);
      if (const std::size_t at = text.find(marker); at != std::string::npos) {
        return static_cast<std::uint16_t>(std::stoul(text.substr(at + marker.size())));
      }
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        pids_.pop_back();
        throw std::runtime_error(program_ + " (scenario " + scenario_arg +
                                 ") exited before listening: " + text);
      }
    }
    throw std::runtime_error(program_ + " (scenario " + scenario_arg +
                             ") did not say its port within 10 s: " + ReadFile(log));
  }

  // The CPU time the stand-ins have used (/proc/PID/schedstat: nanoseconds on a CPU).
  double CpuSeconds() const {
    double seconds = 0;
    for (const pid_t pid : pids_) {
      std::istringstream schedstat(ReadFile("/proc/" + std::to_string(pid) + "/schedstat"));
      double nanoseconds = 0;
      schedstat >> nanoseconds;
      seconds += nanoseconds / 1e9;
    }
    return seconds;
  }

  // SIGTERM to each, then SIGKILL to any still there after 2 s; every one reaped.
  void StopAll() {
    for (const pid_t pid : pids_) kill(pid, SIGTERM);
    const auto until = std::chrono::steady_clock::now() + 2s;
    for (const pid_t pid : pids_) {
      int status = 0;
      while (waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() >= until) {
          kill(pid, SIGKILL);
          waitpid(pid, &status, 0);
          break;
        }
        std::this_thread::sleep_for(5ms);
      }
    }
    pids_.clear();
  }

 private:
  std::string program_;
  std::vector<pid_t> pids_;
};

// The reader pods as the API server would list them; status.ras kept here.
class FakeDirectory final : public ncclguard::probes::RasDirectory {
 public:
  explicit FakeDirectory(std::vector<Json> pods) : pods_(std::move(pods)) {}
  std::vector<Json> ReaderPods() override { return pods_; }
  void Publish(const Json& ras) override {
    ++publishes_;
    published_bytes_ += Json{{"status", {{"ras", ras}}}}.dump().size();
  }
  void Reset() { publishes_ = published_bytes_ = 0; }
  std::size_t publishes() const { return publishes_; }
  std::size_t published_bytes() const { return published_bytes_; }

 private:
  std::vector<Json> pods_;
  std::size_t publishes_ = 0, published_bytes_ = 0;
};

struct Row {
  std::size_t pods = 1;
  int ranks = 16;
  bool straggler = false;
  std::size_t silent = 0;  // pods whose RAS accepts and never answers
  std::chrono::milliseconds timeout = 10s;
  std::string version = "2.29";     // 2.28.7 and later: JSON; "2.26": text
  std::size_t other_processes = 0;  // processes of no reader pod in the fake /proc
  bool json = false;                // the probe asks for JSON (--ras-format json)
  std::string Variant() const {
    std::string v = straggler ? "straggler" : "healthy";
    if (silent > 0) v += ", " + std::to_string(silent) + " silent";
    if (version != "2.29") v += ", NCCL " + version;
    v += json ? ", json" : ", text";
    if (other_processes > 0) v += ", +" + std::to_string(other_processes) + " procs";
    return v;
  }
};

// A job of `ranks` ranks in one communicator, 8 a process (GPUs 0-7), one process a node; at
// `operation` AllReduce, the last rank one behind when straggling.
std::string Scenario(const Row& row, bool silent, long long operation) {
  Json ranks = Json::array();
  for (int r = 0; r < row.ranks; ++r) {
    const int process = r / 8;
    const long long count = row.straggler && r == row.ranks - 1 ? operation - 1 : operation;
    ranks.push_back({{"rank", r},
                     {"gpu", r % 8},
                     {"pid", 4000 + process},
                     {"node", "10.0." + std::to_string(process / 200) + "." +
                                  std::to_string(process % 200 + 10)},
                     {"counts", {0, 0, 12, 0, count}}});
  }
  Json scenario{{"version", row.version},
                {"silent", silent},
                {"collection_seconds", 0.01},
                {"comms", Json::array({{{"hash", "0x27a079b828ff1a75"}, {"ranks", ranks}}})}};
  return scenario.dump();
}

std::string PodUid(std::size_t i) {
  char uid[48];
  std::snprintf(uid, sizeof uid, "5f0c7a2e-1b3d-4c5e-8f90-%012zx", i);
  return uid;
}

Json Pod(std::size_t i, std::uint16_t port, const std::string& started_at) {
  const std::string job = "job-" + std::to_string(i);
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"namespace", "team-" + std::to_string(i % 4)},
        {"name", job + "-worker-0"},
        {"uid", PodUid(i)},
        {"labels", {{"ncclguard.io/ras-reader", "true"}, {"job-name", job}}}}},
      {"spec",
       {{"nodeName", "ip-10-0-0-5"},
        {"containers",
         Json::array({{{"name", "trainer"},
                       {"image", "registry.example/trainer:1"},
                       {"env", Json::array({{{"name", "NCCL_RAS_ADDR"},
                                             {"value", "127.0.0.1:" + std::to_string(port)}},
                                            {{"name", "NCCL_DEBUG"}, {"value", "WARN"}}})}}})}}},
      {"status",
       {{"phase", "Running"},
        {"containerStatuses",
         Json::array({{{"name", "trainer"},
                       {"ready", true},
                       {"state", {{"running", {{"startedAt", started_at}}}}}}})}}}};
}

// A /proc of the pods' processes (and `others` more), each pod's ns/net this process's namespace.
void MakeProcRoot(const fs::path& root, std::size_t pods, std::size_t others) {
  for (std::size_t i = 0; i < pods; ++i) {
    const fs::path pid = root / std::to_string(100000 + i);
    fs::create_directories(pid / "ns");
    WriteFile(pid / "cgroup", "0::/kubepods/besteffort/pod" + PodUid(i) + "/abc\n");
    fs::create_symlink("/proc/self/ns/net", pid / "ns" / "net");
  }
  for (std::size_t i = 0; i < others; ++i) {
    const fs::path pid = root / std::to_string(200000 + i);
    fs::create_directories(pid / "ns");
    WriteFile(pid / "cgroup", "0::/system.slice/containerd.service\n");
    fs::create_symlink("/proc/self/ns/net", pid / "ns" / "net");
  }
}

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

double MaxRssMiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024;
}

double RssMiB() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

constexpr const char* kHeader = "%-5s %-5s %-26s %-5s %9s %9s %9s %10s %9s %11s %10s\n";
constexpr const char* kLine =
    "%-5zu %-5d %-26s %-5s %9.1f %9.1f %9.1f %10.0f %9.0f %11.1f %10.0f\n";

struct Measured {
  std::vector<double> wall_ms, query_ms, cpu_ms, servers_cpu_ms, answered, report_kb;
  std::string published_in;      // the rounds that wrote status.ras: "1", "1,2"
  double first_published_b = 0;  // what round 1 wrote
  double max_rss_mib = 0, rss_growth_mib = 0;
};

Measured RunRow(const Row& row, const std::string& standin, int rounds, const fs::path& dir) {
  fs::create_directories(dir / "proc");
  MakeProcRoot(dir / "proc", row.pods, row.other_processes);
  StandIns standins(standin);
  const std::string started_at = ncclguard::probes::Rfc3339(std::chrono::system_clock::now() - 1h);
  long long operation = 5000;
  std::vector<Json> pods;
  for (std::size_t i = 0; i < row.pods; ++i) {
    const fs::path scenario = dir / ("scenario-" + std::to_string(i) + ".json");
    WriteFile(scenario, Scenario(row, i < row.silent, operation));
    pods.push_back(Pod(i, standins.Start(scenario, dir / ("standin-" + std::to_string(i) + ".log")),
                       started_at));
  }
  auto directory = std::make_shared<FakeDirectory>(std::move(pods));

  double query_ms = 0, report_bytes = 0;
  ncclguard::probes::RasWatchOptions options;
  options.timeout = row.timeout;
  options.init_grace = 0ms;
  options.proc_root = (dir / "proc").string();
  options.json = row.json;
  const double rss_before = RssMiB();
  ncclguard::probes::RasWatcher watcher(
      options, directory,
      [&](const std::vector<ncclguard::probes::RasQuery>& queries,
          std::chrono::milliseconds deadline, std::size_t max_report_bytes) {
        const auto start = std::chrono::steady_clock::now();
        auto answers = ncclguard::probes::QueryRas(queries, deadline, max_report_bytes);
        query_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        for (const auto& answer : answers)
          report_bytes += static_cast<double>(answer.report.size());
        return answers;
      });

  Measured m;
  for (int r = 1; r <= rounds; ++r) {
    ThrowIfInterrupted();
    if (r > 1) {  // the jobs ran on: every count moves (the straggler stays one behind)
      operation += 100;
      for (std::size_t i = 0; i < row.pods; ++i) {
        WriteFile(dir / ("scenario-" + std::to_string(i) + ".json"),
                  Scenario(row, i < row.silent, operation));
      }
    }
    directory->Reset();
    query_ms = report_bytes = 0;
    const double servers_before = standins.CpuSeconds();
    const double cpu_before = CpuSeconds();
    const auto start = std::chrono::steady_clock::now();
    const std::vector<ncclguard::probes::RasPodStanding> standings = watcher.Round();
    const double wall =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const double cpu = (CpuSeconds() - cpu_before) * 1000;
    const double servers_cpu = (standins.CpuSeconds() - servers_before) * 1000;
    const auto answered = std::count_if(standings.begin(), standings.end(),
                                        [](const auto& s) { return s.answer == "Answered"; });
    m.wall_ms.push_back(wall);
    m.query_ms.push_back(query_ms);
    m.cpu_ms.push_back(cpu);
    m.servers_cpu_ms.push_back(servers_cpu);
    m.answered.push_back(static_cast<double>(answered));
    m.report_kb.push_back(report_bytes / 1024);
    if (r == 1) m.first_published_b = static_cast<double>(directory->published_bytes());
    if (directory->publishes() > 0) {
      m.published_in += (m.published_in.empty() ? "" : ",") + std::to_string(r);
    }
    std::printf(kLine, row.pods, row.ranks, row.Variant().c_str(), std::to_string(r).c_str(), wall,
                query_ms, cpu, servers_cpu, static_cast<double>(answered), report_bytes / 1024,
                static_cast<double>(directory->published_bytes()));
    std::fflush(stdout);
    for (const auto& s : standings) {
      if (s.answer != "Answered" && s.answer != "TimedOut") {
        throw std::runtime_error("pod " + s.pod + ": " + s.answer + ": " + s.message);
      }
    }
  }
  m.max_rss_mib = MaxRssMiB();
  m.rss_growth_mib = RssMiB() - rss_before;
  return m;
}

int Run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s STANDIN_PATH [ROUNDS]\n", argv[0]);
    return 2;
  }
  const std::string standin = argv[1];
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  try {
    ncclguard::probes::RunInNetworkNamespace("/proc/self/ns/net", [] {});
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "skipped: each query enters its pod's network namespace, which takes root "
                 "(CAP_SYS_ADMIN): %s\n",
                 e.what());
    return 77;
  }
  TempDir work;
  // The probe's log lines (one a pod whose standing changed) cost what they cost, in a file.
  ncclguard::log::Configure(
      {ncclguard::log::Level::Info, ncclguard::log::Format::Json,
       std::make_shared<spdlog::sinks::basic_file_sink_mt>((work.path() / "probe.log").string())});

  std::vector<Row> rows;
  for (const std::size_t pods : {1u, 10u, 100u}) {
    for (const int ranks : {16, 256}) {
      for (const bool straggler : {false, true}) rows.push_back({pods, ranks, straggler});
    }
  }
  rows.push_back({100, 256, false, 0, 10s, "2.26"});
  rows.push_back({100, 256, false, 0, 10s, "2.29", 0, true});
  rows.push_back({100, 256, true, 0, 10s, "2.29", 0, true});
  rows.push_back({100, 16, false, 0, 10s, "2.29", 5000});
  rows.push_back({100, 16, false, 10, 2s});

  std::printf(kHeader, "pods", "ranks", "variant", "round", "wall_ms", "query_ms", "cpu_ms",
              "servers_ms", "answered", "report_kB", "status_B");
  std::vector<std::pair<Row, Measured>> results;
  for (const Row& row : rows) {
    const fs::path dir = work.path() / ("row-" + std::to_string(results.size()));
    results.emplace_back(row, RunRow(row, standin, rounds, dir));
  }

  std::printf(
      "\nmedians of %d rounds (cpu_ms: this process, the probe's part; servers_ms: the "
      "stand-ins' CPU; status1_B: bytes of status.ras written in round 1; "
      "written_in: the rounds that wrote it; maxrss_M: peak RSS after the row; rss+_M: resident "
      "growth over the row)\n",
      rounds);
  std::printf("%-5s %-5s %-26s %9s %9s %9s %10s %9s %11s %10s %-10s %8s %8s\n", "pods", "ranks",
              "variant", "wall_ms", "query_ms", "cpu_ms", "servers_ms", "answered", "report_kB",
              "status1_B", "written_in", "maxrss_M", "rss+_M");
  for (const auto& [row, m] : results) {
    std::printf("%-5zu %-5d %-26s %9.1f %9.1f %9.1f %10.0f %9.0f %11.1f %10.0f %-10s %8.1f %8.1f\n",
                row.pods, row.ranks, row.Variant().c_str(), Median(m.wall_ms), Median(m.query_ms),
                Median(m.cpu_ms), Median(m.servers_cpu_ms), Median(m.answered), Median(m.report_kb),
                m.first_published_b, m.published_in.empty() ? "-" : m.published_in.c_str(),
                m.max_rss_mib, m.rss_growth_mib);
  }
  ncclguard::log::Flush();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ncclguard_ras_round_bench: %s\n", e.what());
    return 1;
  }
}
