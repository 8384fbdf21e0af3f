// What one round of the checks between nodes costs a node (probes/peer_round.h), at 2, 16 and 64
// nodes in the group: N probes in this process, each on an address of its own in 127.0.2.0/24,
// serving and testing over real sockets and libfabric's tcp provider, their NodeValidations in
// memory in place of the API server (each as large as a real one: 14 checks). Per node and
// round: CPU time (the process's, divided by N: every node does the same work), bytes read from
// and written to the API (the group's list, twice a round; the status writes), TCP connections
// and fabric pings, and the round's wall time (a window of 2 x timeout + 2 x skew, then the
// second pass when the first found a failure). ROUNDS rounds each (default 3), medians.
// Usage: ncclguard_peer_round_bench [ROUNDS]
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "probes/peer_round.h"

namespace {

using ncclguard::core::Json;
using namespace std::chrono_literals;

class Directory {
 public:
  void Add(const std::string& node, Json status) {
    const std::lock_guard lock(mutex_);
    validations_[node] = {{"apiVersion", "ncclguard.io/v1alpha1"},
                          {"kind", "NodeValidation"},
                          {"metadata", {{"name", node}}},
                          {"status", std::move(status)}};
  }
  std::vector<Json> List() {
    const std::lock_guard lock(mutex_);
    std::vector<Json> items;
    for (const auto& [name, validation] : validations_) {
      items.push_back(validation);
      read_bytes_ += validation.dump().size();
    }
    return items;
  }
  void Publish(const std::string& node, const Json& peer) {
    const std::lock_guard lock(mutex_);
    validations_.at(node)["status"]["peer"] = peer;
    written_bytes_ += Json{{"status", {{"peer", peer}}}}.dump().size();
    ++writes_;
  }
  void Reset() {
    const std::lock_guard lock(mutex_);
    read_bytes_ = written_bytes_ = writes_ = 0;
  }
  std::size_t read_bytes() const { return read_bytes_; }
  std::size_t written_bytes() const { return written_bytes_; }
  std::size_t writes() const { return writes_; }

 private:
  std::mutex mutex_;
  std::map<std::string, Json> validations_;
  std::size_t read_bytes_ = 0, written_bytes_ = 0, writes_ = 0;
};

class View : public ncclguard::probes::PeerDirectory {
 public:
  View(Directory& all, std::string node) : all_(all), node_(std::move(node)) {}
  std::vector<Json> List() override { return all_.List(); }
  void Publish(const Json& peer) override { all_.Publish(node_, peer); }

 private:
  Directory& all_;
  std::string node_;
};

std::string Now() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return text;
}

// A NodeValidation status as the probe writes it: 14 checks.
Json Status() {
  Json checks = Json::array();
  for (int i = 0; i < 14; ++i) {
    checks.push_back({{"id", "check-" + std::to_string(i)},
                      {"status", "Pass"},
                      {"observed", "32 EFA devices (p5.48xlarge)"},
                      {"expected", "32"},
                      {"message", "32 EFA devices, as p5.48xlarge has: what the check saw"},
                      {"guide",
                       "https://github.com/ncclguard/ncclguard/blob/main/docs/guide.md"
                       "#efa-config"}});
  }
  return {{"instanceType", "p5.48xlarge"},
          {"summary", "Pass"},
          {"lastProbeTime", Now()},
          {"probeVersion", "0.1.0"},
          {"checks", checks}};
}

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  std::printf("%-6s %-6s %10s %12s %12s %8s %8s %8s %8s\n", "nodes", "round", "cpu_ms/node",
              "read_kB/node", "written_B", "writes", "tcp/node", "pings", "wall_s");
  std::vector<std::string> medians;
  std::uint16_t base_port = 29600;
  for (const std::size_t n : {2u, 16u, 64u}) {
    Directory directory;
    std::vector<std::unique_ptr<ncclguard::probes::PeerRunner>> runners;
    std::atomic<std::size_t> tcp_tests{0}, pings{0};
    for (std::size_t i = 0; i < n; ++i) {
      const std::string node = "ip-10-0-" + std::to_string(1000 + i);
      const std::string address = "127.0.2." + std::to_string(i + 1);
      directory.Add(node, Status());
      ncclguard::probes::PeerRoundOptions options;
      options.node_name = node;
      options.instance_type = "p5.48xlarge";
      options.address = address;
      options.serve_address = address;
      options.fixed_ports = {base_port};
      options.port_first = 47000;
      options.port_last = 47999;
      options.on_test = [&](std::string_view tier, std::string_view, bool, double) {
        ++(tier == "tcp" ? tcp_tests : pings);
      };
      ncclguard::probes::FabricOptions fabric;
      fabric.provider = "tcp";
      fabric.source = address;
      std::unique_ptr<ncclguard::probes::FabricEndpoint> answering;
      try {
        answering = ncclguard::probes::FabricEndpoint::Open(fabric);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "no fabric tier: %s\n", e.what());
      }
      runners.push_back(std::make_unique<ncclguard::probes::PeerRunner>(
          options, std::make_shared<View>(directory, node), std::move(answering),
          [fabric] { return ncclguard::probes::FabricEndpoint::Open(fabric); }));
      runners.back()->Announce();
    }
    ++base_port;
    std::vector<double> cpu, read, written, writes, tcp, fabric_pings, wall;
    for (int r = 0; r < rounds; ++r) {
      directory.Reset();
      tcp_tests = 0;
      pings = 0;
      const double cpu_before = CpuSeconds();
      const auto start = std::chrono::steady_clock::now();
      ncclguard::kube::StopToken stop;
      std::vector<std::thread> threads;
      const std::uint64_t round = 5000 + static_cast<std::uint64_t>(r);
      for (auto& runner : runners) {
        threads.emplace_back([&, round] { runner->RunRound(round, stop, 8s); });
      }
      for (std::thread& t : threads) t.join();
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double nodes = static_cast<double>(n);
      cpu.push_back((CpuSeconds() - cpu_before) * 1000 / nodes);
      read.push_back(static_cast<double>(directory.read_bytes()) / 1024 / nodes);
      written.push_back(static_cast<double>(directory.written_bytes()));
      writes.push_back(static_cast<double>(directory.writes()));
      tcp.push_back(static_cast<double>(tcp_tests.load()) / nodes);
      fabric_pings.push_back(static_cast<double>(pings.load()));
      wall.push_back(seconds);
      std::printf("%-6zu %-6d %10.1f %12.1f %12.0f %8.0f %8.2f %8.0f %8.1f\n", n, r, cpu.back(),
                  read.back(), written.back(), writes.back(), tcp.back(), fabric_pings.back(),
                  seconds);
    }
    char line[200];
    std::snprintf(line, sizeof line, "%-6zu %-6s %10.1f %12.1f %12.0f %8.0f %8.2f %8.0f %8.1f", n,
                  "med", Median(cpu), Median(read), Median(written), Median(writes), Median(tcp),
                  Median(fabric_pings), Median(wall));
    medians.emplace_back(line);
  }
  std::printf("\nmedians of %d rounds\n", rounds);
  for (const std::string& m : medians) std::printf("%s\n", m.c_str());
  return 0;
}
