// A client for the RAS service of NCCL 2.24 and later (guide section 9): every NCCL process
// listens on localhost:28028 (NCCL_RAS_ADDR) and answers a line protocol, the one `ncclras`
// speaks. The client sends one command at a time and waits for its answer, as ncclras does:
//
//   CLIENT PROTOCOL 2   -> SERVER PROTOCOL <n>
//   TIMEOUT <s>         -> OK        (how long RAS waits for the job's other processes)
//   SET FORMAT json     -> OK        (2.28.7 and later; older servers answer "ERROR: Unknown
//                                     command ..." and keep the connection: the report then
//                                     comes as text)
//   [VERBOSE ]STATUS    -> the report, then the server closes the connection
//
// The servers are untrusted (any process in a pod may listen on the port): every answer is
// bounded in bytes and every query in time, and many are driven at once by one poll loop.
// The report is handed over as bytes; core/ras.h reads it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/ras.h"

namespace ncclguard::probes {

// NCCL's default RAS port (NCCL_RAS_ADDR's port when it is not set).
inline constexpr std::uint16_t kRasPort = 28028;
// A protocol line (SERVER PROTOCOL, OK, ERROR) longer than this is not RAS.
inline constexpr std::size_t kMaxRasProtocolLine = 4096;

// NCCL_RAS_ADDR's form, "host:port" or "[v6]:port" (NCCL takes the last colon as the port's):
// the host without brackets and the port; nullopt when there is no colon or the port is not
// 1-65535.
std::optional<std::pair<std::string, std::uint16_t>> ParseRasAddress(std::string_view address);

struct RasQuery {
  // A /proc/PID/ns/net path to connect from (a pod's namespace, where its localhost is);
  // "" connects from this process's namespace.
  std::string netns;
  // A numeric IPv4 or IPv6 address, or "localhost": 127.0.0.1 and ::1 are both tried, since
  // NCCL listens on whichever its resolver names first.
  std::string host = "127.0.0.1";
  std::uint16_t port = kRasPort;
  bool json = true;     // ask SET FORMAT json first; text when the server refuses
  bool verbose = true;  // VERBOSE STATUS (else STATUS)
  // Sent as TIMEOUT <s>: how long RAS waits for the job's processes (not sent when negative:
  // the server's default). Give QueryRas a deadline beyond it.
  int server_timeout_s = 5;
};

enum class RasAnswerStatus {
  Answered,        // the report came and the server closed the connection
  Refused,         // nothing listens: the connection was refused
  TimedOut,        // the deadline passed first (report: what came by then)
  ProtocolError,   // the server spoke something else, or closed before the report
  TooLarge,        // the report passed max_report_bytes (report: its first max_report_bytes)
  NamespaceError,  // the network namespace could not be entered
  SocketError,     // anything else between here and the server; a host that is not an address
};
std::string_view RasAnswerStatusName(RasAnswerStatus status);  // "Answered", "Refused", ...

struct RasAnswer {
  RasAnswerStatus status = RasAnswerStatus::TimedOut;
  // The bytes the server sent after STATUS, at most max_report_bytes. A report that the server
  // cut by closing early is handed over as it came (Answered): core::RasReader marks it truncated.
  std::string report;
  bool json = false;        // the server accepted SET FORMAT json
  int server_protocol = 0;  // from SERVER PROTOCOL <n>
  std::string error;        // why, when not Answered: "no SERVER PROTOCOL line within 7000 ms"
  std::chrono::milliseconds took{0};  // from the call to this answer
};

// Runs every query at once and returns one answer per query, in order, by `deadline` from the
// call (plus scheduling slack) whatever the servers do. Each query's socket is made and its
// non-blocking connect started in its network namespace (one thread per distinct namespace,
// probes::RunInNetworkNamespace; a socket stays in the namespace it was made in), then one poll
// loop on the calling thread drives them all. Memory: a report's string never holds more than
// max_report_bytes (its capacity included), an answer line kMaxRasProtocolLine; CPU: linear in
// the bytes received.
//
// A server that refuses SET FORMAT json keeps the connection (NCCL before 2.28.7 answers
// "ERROR: Unknown command"), and the report comes as text on it; one that closes instead is
// asked once more, in text, on a new connection.
std::vector<RasAnswer> QueryRas(const std::vector<RasQuery>& queries,
                                std::chrono::milliseconds deadline,
                                std::size_t max_report_bytes = core::kMaxRasReportBytes);

}  // namespace ncclguard::probes
