// `ncclguard peer serve | test`: the TCP tier of the checks between nodes (probes/peer_tcp.h) by
// hand, as `fi_pingpong` is for EFA: one node serves NCCL's ports for a while, another tests
// them. Exit 0: every port passed; 1: a port failed; 2: usage or input error.
#include <CLI/CLI.hpp>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "cli/commands.h"
#include "cli/duration.h"
#include "cli/exit_code.h"
#include "core/errors.h"
#include "core/guide.h"
#include "core/json.h"
#include "probes/peer_fabric.h"
#include "probes/peer_tcp.h"

namespace ncclguard::cli {
namespace {

struct PeerOptions {
  std::string ports;
  std::size_t ephemeral = 0;
  std::uint64_t seed = 0;
  std::string address = "0.0.0.0";
  std::string host;
  std::string duration = "60s";
  std::string timeout = "2s";
  std::string output = "text";
  std::string guide_base_url = std::string(core::kDefaultGuideBaseUrl);
  // The fabric tier: a libfabric provider ("efa", "tcp"), the address it binds to, and (test)
  // the serving side's endpoint address as `peer serve` printed it.
  std::string fabric;
  std::string fabric_source;
  std::string fabric_address;
};

// --ports and a --ephemeral sample of this machine's ip_local_port_range (the same sample on
// every node whose range is the same, for the same --seed).
std::vector<std::uint16_t> Ports(const PeerOptions& options) {
  if (options.ports.empty() && options.ephemeral == 0 && !options.fabric.empty()) return {};
  std::vector<std::uint16_t> ports;
  if (!options.ports.empty()) ports = probes::ParsePeerPorts(options.ports);
  if (options.ephemeral > 0) {
    const auto [first, last] = probes::ReadLocalPortRange();
    for (const std::uint16_t port : probes::SamplePorts(
             first, last, std::min(options.ephemeral, probes::kMaxPeerPorts), options.seed)) {
      ports.push_back(port);
    }
    std::sort(ports.begin(), ports.end());
    ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
  }
  if (ports.empty()) throw core::InputError("give --ports, --ephemeral N, or --fabric");
  if (ports.size() > probes::kMaxPeerPorts) {
    throw core::InputError("more than " + std::to_string(probes::kMaxPeerPorts) + " ports");
  }
  return ports;
}

// A duration flag, longer than 0; a bad one is the user's input error.
std::chrono::milliseconds Duration(const std::string& text, const std::string& flag) {
  std::chrono::milliseconds duration{0};
  try {
    duration = ParseDuration(text, flag);
  } catch (const std::invalid_argument& e) {
    throw core::InputError(e.what());
  }
  if (duration.count() <= 0) throw core::InputError(flag + " must be longer than 0");
  return duration;
}

std::string PortList(const std::vector<std::uint16_t>& ports) {
  std::string list;
  for (const std::uint16_t port : ports) list += (list.empty() ? "" : ",") + std::to_string(port);
  return list;
}

std::unique_ptr<probes::FabricEndpoint> OpenFabric(const PeerOptions& options) {
  probes::FabricOptions fabric;
  fabric.provider = options.fabric;
  fabric.source = options.fabric_source;
  return probes::FabricEndpoint::Open(fabric);
}

int RunServe(const PeerOptions& options) {
  probes::PeerServeOptions serve;
  serve.address = options.address;
  serve.ports = Ports(options);
  serve.duration = Duration(options.duration, "--duration");
  std::unique_ptr<probes::FabricEndpoint> fabric;
  std::thread answering;
  std::uint64_t answered = 0;
  std::atomic<bool> stop{false};
  if (!options.fabric.empty()) {
    fabric = OpenFabric(options);
    // What `peer test --fabric-address` takes, on a line of its own.
    std::cout << "fabric " << fabric->Provider() << " address " << fabric->Address() << std::endl;
    answering = std::thread([&, until = std::chrono::steady_clock::now() + serve.duration] {
      answered = fabric->Answer(until, &stop);
    });
  }
  probes::PeerServeSummary summary;
  if (!serve.ports.empty()) {
    std::cerr << "peer serve: serving " << serve.ports.size() << " port(s) on " << serve.address
              << " for " << options.duration << " (" << PortList(serve.ports) << ")\n";
    try {
      summary = probes::ServePeerPorts(serve);
    } catch (...) {
      stop = true;
      if (answering.joinable()) answering.join();
      throw;
    }
    for (const std::string& unserved : summary.unserved) {
      std::cerr << "peer serve: not served: " << unserved << "\n";
    }
    std::cout << "served " << summary.served.size() << " of " << serve.ports.size()
              << " port(s); answered " << summary.answered << " test(s), dropped "
              << summary.dropped << " other connection(s)\n";
  }
  if (answering.joinable()) {
    answering.join();
    std::cout << "fabric: answered " << answered << " ping(s)\n";
  }
  return kExitClean;
}

// What a failed port most likely means, and where the guide explains it.
std::string Meaning(probes::PortOutcome outcome) {
  switch (outcome) {
    case probes::PortOutcome::kTimedOut:
      return "no answer: a firewall or security group drops new connections to it";
    case probes::PortOutcome::kRefused:
      return "refused: nothing serves it there, or a REJECT rule";
    case probes::PortOutcome::kUnreachable:
      return "unreachable: a route, or a REJECT rule with an ICMP answer";
    case probes::PortOutcome::kReset:
      return "reset after connecting: a middlebox or the peer closed it";
    case probes::PortOutcome::kWrongAnswer:
      return "something other than `ncclguard peer serve` holds it";
    case probes::PortOutcome::kPassed:
      break;
  }
  return "";
}

int RunTest(const PeerOptions& options) {
  const std::vector<std::uint16_t> ports = Ports(options);
  const std::chrono::milliseconds timeout = Duration(options.timeout, "--timeout");
  if (!options.fabric.empty() && options.fabric_address.empty()) {
    throw core::InputError("--fabric needs --fabric-address (what `peer serve --fabric` printed)");
  }
  const auto results = probes::TestPeerPorts(options.host, ports, timeout);
  std::optional<probes::FabricTest> fabric;
  std::string provider;
  if (!options.fabric.empty()) {
    const auto endpoint = OpenFabric(options);
    provider = endpoint->Provider();
    fabric = endpoint->Ping(options.fabric_address, timeout);
  }
  std::size_t passed = 0;
  for (const probes::PortTest& r : results) passed += r.outcome == probes::PortOutcome::kPassed;
  const bool fabric_passed = !fabric || fabric->outcome == probes::FabricOutcome::kPassed;
  const std::string firewall = core::GuideLink(options.guide_base_url, "host-firewall");
  const std::string security_group = core::GuideLink(options.guide_base_url, "security-group");
  if (options.output == "json") {
    core::Json out = core::Json::array();
    for (const probes::PortTest& r : results) {
      out.push_back({{"tier", "tcp"},
                     {"host", options.host},
                     {"port", r.port},
                     {"result", probes::PortOutcomeName(r.outcome)},
                     {"milliseconds", static_cast<double>(r.took.count()) / 1000.0},
                     {"detail", r.detail}});
      if (r.outcome != probes::PortOutcome::kPassed) out.back()["guide"] = firewall;
    }
    if (fabric) {
      out.push_back({{"tier", "fabric"},
                     {"provider", provider},
                     {"result", probes::FabricOutcomeName(fabric->outcome)},
                     {"milliseconds", static_cast<double>(fabric->took.count()) / 1000.0},
                     {"detail", fabric->detail}});
      if (!fabric_passed) out.back()["guide"] = security_group;
    }
    std::cout << out.dump(2) << "\n";
  } else {
    if (!results.empty()) {
      std::printf("%-6s %-13s %10s  %s\n", "PORT", "RESULT", "TIME", "DETAIL");
      for (const probes::PortTest& r : results) {
        std::printf("%-6u %-13s %8.1fms  %s\n", static_cast<unsigned>(r.port),
                    std::string(probes::PortOutcomeName(r.outcome)).c_str(),
                    static_cast<double>(r.took.count()) / 1000.0, r.detail.c_str());
      }
      std::printf("%zu of %zu port(s) of %s passed\n", passed, results.size(),
                  options.host.c_str());
      for (const probes::PortTest& r : results) {
        if (r.outcome == probes::PortOutcome::kPassed) continue;
        std::printf("- %u %s \u2014 see %s\n", static_cast<unsigned>(r.port),
                    Meaning(r.outcome).c_str(), firewall.c_str());
      }
    }
    if (fabric) {
      std::printf("fabric (%s): %s in %.1fms%s%s\n", provider.c_str(),
                  std::string(probes::FabricOutcomeName(fabric->outcome)).c_str(),
                  static_cast<double>(fabric->took.count()) / 1000.0,
                  fabric->detail.empty() ? "" : ": ", fabric->detail.c_str());
      if (!fabric_passed) {
        // TCP through and the fabric not: what a security group without its self-referencing
        // rule does to EFA.
        std::printf("- the fabric does not carry a message to that endpoint%s \u2014 see %s\n",
                    !results.empty() && passed == results.size() ? " while TCP passes" : "",
                    security_group.c_str());
      }
    }
  }
  return passed == results.size() && fabric_passed ? kExitClean : kExitDenied;
}

void AddFabricFlags(CLI::App& command, PeerOptions& options) {
  command.add_option("--fabric", options.fabric,
                     "also a reliable-datagram ping-pong through libfabric with this provider "
                     "(efa on EFA nodes; tcp elsewhere)");
  command.add_option("--fabric-source", options.fabric_source,
                     "numeric address the fabric endpoint binds to (providers that take one)");
}

void AddPortFlags(CLI::App& command, PeerOptions& options) {
  command.add_option("--ports", options.ports,
                     "ports and ranges, e.g. 29500,40000-40003 (at most 64 in all)");
  command.add_option("--ephemeral", options.ephemeral,
                     "also a sample of N ports of this machine's ip_local_port_range, where "
                     "NCCL's bootstrap and socket transport listen");
  command.add_option("--seed", options.seed,
                     "which sample --ephemeral takes (the same on both nodes for the same seed)");
}

}  // namespace

Command AddPeerCommand(CLI::App& app) {
  auto options = std::make_shared<PeerOptions>();
  CLI::App* peer = app.add_subcommand(
      "peer",
      "test whether another node takes TCP connections on NCCL's ports (serve on one "
      "node, test from another)");
  peer->require_subcommand(1);
  CLI::App* serve =
      peer->add_subcommand("serve", "serve the ports for a while, answering each test");
  AddPortFlags(*serve, *options);
  serve->add_option("--address", options->address, "numeric address to listen on");
  serve->add_option("--duration", options->duration, "how long to serve (e.g. 60s, 5m)");
  AddFabricFlags(*serve, *options);
  CLI::App* test = peer->add_subcommand(
      "test", "connect to each port of a node that serves them (exit 1 when one fails)");
  test->add_option("host", options->host, "the serving node's numeric IP address")->required();
  AddPortFlags(*test, *options);
  test->add_option("--timeout", options->timeout, "how long every port may take in all");
  test->add_option("-o,--output", options->output, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  AddFabricFlags(*test, *options);
  test->add_option("--fabric-address", options->fabric_address,
                   "the serving endpoint's address, as `peer serve --fabric` printed it");
  test->add_option("--guide-base-url", options->guide_base_url,
                   "where docs/guide.md is published (links in the output)");
  return {peer,
          [options, serve] { return serve->parsed() ? RunServe(*options) : RunTest(*options); }};
}

}  // namespace ncclguard::cli
