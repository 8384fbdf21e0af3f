// The TCP tier of the checks between nodes (docs/guide.md sections 1 and 16): whether a peer
// takes new TCP connections on the ports NCCL uses (its bootstrap and socket transport listen on
// ephemeral ports it cannot pin, and the master port). One side serves the ports for a bounded
// time, the other connects to each, says hello and reads the echo: a few dozen bytes a port.
// What the client saw tells a firewall's DROP (the connection times out) from its REJECT or an
// unserved port (refused) and an ICMP host-unreachable.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ncclguard::probes {

// At most this many ports a test or a server: a test is a sample, not a port scan.
inline constexpr std::size_t kMaxPeerPorts = 64;

// "29500,40000-40003": ports and inclusive ranges, comma-separated, each 1-65535, sorted and
// unique in the result. Throws core::InputError on anything else or past kMaxPeerPorts.
std::vector<std::uint16_t> ParsePeerPorts(std::string_view text);

// `count` ports of [first, last] (the kernel's ip_local_port_range), the same for the same
// arguments on every node, spread over the range; all of it when it holds fewer.
std::vector<std::uint16_t> SamplePorts(std::uint16_t first, std::uint16_t last, std::size_t count,
                                       std::uint64_t seed);

// "32768\t60999\n" (/proc/sys/net/ipv4/ip_local_port_range) as its two ports. Throws
// core::InputError on anything else.
std::pair<std::uint16_t, std::uint16_t> ParsePortRange(std::string_view text);

// The calling thread's network namespace's ip_local_port_range (net sysctls answer for the
// reader's namespace). Throws core::InputError naming the file when it cannot be read or parsed.
std::pair<std::uint16_t, std::uint16_t> ReadLocalPortRange();

struct PeerServeOptions {
  std::string address = "0.0.0.0";  // numeric IPv4 or IPv6
  std::vector<std::uint16_t> ports;
  std::chrono::milliseconds duration{60'000};
  // Connections answered at once; more wait in the listen backlog.
  std::size_t max_connections = 64;
  // How long one connection may take to say hello.
  std::chrono::milliseconds hello_timeout{2'000};
};

struct PeerServeSummary {
  std::vector<std::uint16_t> served;
  std::vector<std::string> unserved;  // "40001: Address already in use": a port in use is left
  std::uint64_t answered = 0;         // hellos echoed
  std::uint64_t dropped = 0;          // connections that said something else, or nothing in time
};

// Serves `options.ports` until the duration ends or `stop` turns true: every connection that
// sends a hello gets it back, then is closed. Ports it cannot bind are reported, not fatal; no
// port at all throws core::InputError. Never more than max_connections open, each read at most
// a hello's length.
PeerServeSummary ServePeerPorts(const PeerServeOptions& options,
                                const std::atomic<bool>* stop = nullptr);

enum class PortOutcome {
  kPassed,       // connected, hello echoed
  kRefused,      // RST: nothing listens, or a REJECT rule with tcp-reset
  kTimedOut,     // no answer to the SYN in time: a DROP rule, a security group, a dead host
  kUnreachable,  // ICMP host or network unreachable, or a REJECT with one
  kReset,        // connected, then reset or closed before the echo
  kWrongAnswer,  // something else answers on the port
};
std::string_view PortOutcomeName(PortOutcome outcome);  // "passed", "refused", ...

struct PortTest {
  std::uint16_t port = 0;
  PortOutcome outcome = PortOutcome::kTimedOut;
  std::chrono::microseconds took{0};
  std::string detail;  // the error's words, when it failed
};

// Tests every port of `host` (a numeric address) at once within `timeout`; in port order.
// Throws core::InputError for a host that is not a numeric address.
std::vector<PortTest> TestPeerPorts(const std::string& host,
                                    const std::vector<std::uint16_t>& ports,
                                    std::chrono::milliseconds timeout);

}  // namespace ncclguard::probes
