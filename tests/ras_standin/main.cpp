// ncclguard-ras-standin: a TEST STAND-IN for the RAS service of an NCCL process, speaking NCCL's
// RAS client protocol 2 as NCCL's src/ras/client_support.cc defines it (rasClientEventLoop):
// line-based, case-insensitive commands; CLIENT PROTOCOL n, TIMEOUT n, SET FORMAT text|json (2.28
// and later), STATUS and VERBOSE STATUS, whose report ends the connection. The report is rendered
// by tests/common/ras_render.h from a scenario file, read again for every query, so that a test
// changes what the next query sees by replacing the file. The node tests run it in pods, where
// there is no GPU and no NCCL. Never part of ncclguard.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ras_render.h"

namespace {

constexpr const char* kUsage =
    R"(ncclguard-ras-standin: a test stand-in for an NCCL process's RAS service (not NCCL).
It speaks NCCL's RAS client protocol 2 as NCCL's src/ras/client_support.cc defines it, and answers
STATUS / VERBOSE STATUS with a report rendered from a scenario file instead of a real job.

Usage:
  ncclguard-ras-standin --scenario PATH [--port N] [--address IP]
  ncclguard-ras-standin --scenario PATH --render [--format text|json] [--status]

  --scenario PATH  the scenario (JSON, below); read again for every query
  --port N         the port to listen on (28028, NCCL's; 0: any free port, logged)
  --address IP     the address to listen on (127.0.0.1); one outside 127.0.0.0/8 only when given
  --render         print the report of the scenario to stdout and exit
  --format F       with --render: text (default) or json (2.28 and later)
  --status         with --render: the report of STATUS (default: VERBOSE STATUS)

Protocol (commands end with \n, case-insensitive, as NCCL's server):
  CLIENT PROTOCOL n  -> SERVER PROTOCOL 2
  TIMEOUT n          -> OK (ERROR: Invalid timeout value ... when n is not a number >= 0)
  SET FORMAT json|text -> OK (2.28 and later; before: ERROR: Unknown command ...)
  STATUS, VERBOSE STATUS -> the report, then the connection is closed
  anything else      -> ERROR: Unknown command <line>

Scenario:
  {"version": "2.26",            // "2.24", "2.26", "2.28" (2.28.7-2.28.9), "2.29"
   "nccl_version": "2.26.5",     // optional: the version printed
   "cuda": 12080, "timeouts": 0, "collection_seconds": 0.0,
   "silent": false,              // true: accept connections and never answer
   "comms": [{"hash": "0x27a079b828ff1a75",
              "ranks": [{"rank": 0, "gpu": 0, "nvml": 0, "pid": 4242, "node": "10.0.0.5",
                         "counts": [0, 0, 0, 0, 100],   // Broadcast, Reduce, AllGather,
                                                        // ReduceScatter, AllReduce
                         "init_state": 0, "async_error": 0,  // ncclResult_t
                         "missing": false,  // its process sends no data (unresponsive)
                         "dead": false}]}]} // its process is considered dead

Logs one line per query to stderr. SIGTERM and SIGINT end it with status 0.
)";

// NCCL's rasClient recvBuffer: a longer line without its end closes the connection.
constexpr std::size_t kMaxLine = 1024;
// Connections served at once; more are closed on accept.
constexpr std::size_t kMaxConnections = 256;

volatile sig_atomic_t g_stop = 0;

void OnSignal(int) { g_stop = 1; }

struct Options {
  std::string scenario;
  std::string address = "127.0.0.1";
  int port = 28028;
  bool render = false;
  bool json = false;
  bool verbose = true;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("reading " + path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

ncclguard::ras_fake::RasScenario LoadScenario(const std::string& path) {
  return ncclguard::ras_fake::ParseRasScenario(ReadFile(path));
}

struct Connection {
  int fd = -1;
  std::string peer;
  std::string in;
  std::string out;
  bool json = false;
  bool finished = false;  // close once `out` is sent
  bool silent = false;    // read and drop everything, never answer
};

bool StartsWithNoCase(const std::string& line, const char* prefix) {
  return strncasecmp(line.c_str(), prefix, std::strlen(prefix)) == 0;
}

void Log(const Connection& connection, const std::string& what) {
  std::cerr << "ncclguard-ras-standin: " << connection.peer << ": " << what << std::endl;
}

// One command line (without its end), as rasClientEventLoop handles it.
void HandleCommand(Connection& connection, const std::string& line, const Options& options) {
  if (StartsWithNoCase(line, "client protocol ")) {
    connection.out += "SERVER PROTOCOL 2\n";
    return;
  }
  if (StartsWithNoCase(line, "timeout ")) {
    const std::string value = line.substr(std::strlen("timeout "));
    char* end = nullptr;
    const long timeout = std::strtol(value.c_str(), &end, 10);
    if (timeout < 0 || end == nullptr || *end != '\0') {
      connection.out += "ERROR: Invalid timeout value " + value + "\n";
    } else {
      connection.out += "OK\n";
    }
    return;
  }
  const bool status = strcasecmp(line.c_str(), "status") == 0;
  const bool verbose = strcasecmp(line.c_str(), "verbose status") == 0;
  const bool set_format = StartsWithNoCase(line, "set format ");
  if (!status && !verbose && !set_format) {
    connection.out += "ERROR: Unknown command " + line + "\n";
    return;
  }
  ncclguard::ras_fake::RasScenario scenario;
  try {
    scenario = LoadScenario(options.scenario);
  } catch (const std::exception& e) {
    // No answer NCCL would give: the test sees a connection closed without a report.
    Log(connection, line + " -> closed: " + e.what());
    connection.finished = true;
    return;
  }
  if (scenario.silent) {
    Log(connection, line + " -> silent (no answer)");
    connection.silent = true;
    return;
  }
  if (set_format) {
    if (!ncclguard::ras_fake::RasVersionHasJson(scenario.version)) {
      connection.out += "ERROR: Unknown command " + line + "\n";
      return;
    }
    const std::string format = line.substr(std::strlen("set format "));
    if (strcasecmp(format.c_str(), "text") == 0 || strcasecmp(format.c_str(), "json") == 0) {
      connection.json = strcasecmp(format.c_str(), "json") == 0;
      connection.out += "OK\n";
    } else {
      connection.out += "ERROR: Invalid format " + format + "\n";
    }
    return;
  }
  scenario.verbose = verbose;
  std::string report;
  try {
    report = connection.json ? ncclguard::ras_fake::RenderRasJson(scenario)
                             : ncclguard::ras_fake::RenderRasText(scenario);
  } catch (const std::exception& e) {
    Log(connection, line + " -> closed: " + e.what());
    connection.finished = true;
    return;
  }
  Log(connection, line + " -> " + (connection.json ? "json" : "text") + " report, NCCL " +
                      scenario.version + ", " + std::to_string(report.size()) + " bytes");
  connection.out += report;
  connection.finished = true;
}

// Reads what arrived and answers every complete line; false: close the connection.
bool Receive(Connection& connection, const Options& options) {
  char buffer[4096];
  const ssize_t n = recv(connection.fd, buffer, sizeof buffer, MSG_DONTWAIT);
  if (n == 0) return false;
  if (n < 0) return errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK;
  if (connection.silent || connection.finished) return true;  // NCCL stops reading too
  connection.in.append(buffer, static_cast<std::size_t>(n));
  std::size_t start = 0;
  for (std::size_t end; !connection.finished && !connection.silent &&
                        (end = connection.in.find('\n', start)) != std::string::npos;
       start = end + 1) {
    std::string line = connection.in.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    HandleCommand(connection, line, options);
  }
  connection.in.erase(0, start);
  if (connection.in.size() >= kMaxLine) {
    Log(connection, "a line over 1024 bytes: closed (as NCCL)");
    return false;
  }
  return true;
}

// Sends what is queued; false: close the connection.
bool Send(Connection& connection) {
  while (!connection.out.empty()) {
    const ssize_t n = send(connection.fd, connection.out.data(), connection.out.size(),
                           MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) return errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK;
    connection.out.erase(0, static_cast<std::size_t>(n));
  }
  return !connection.finished;
}

std::string PeerName(const sockaddr_storage& address) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (address.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    inet_ntop(AF_INET, &v4.sin_addr, host, sizeof host);
    port = ntohs(v4.sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
    inet_ntop(AF_INET6, &v6.sin6_addr, host, sizeof host);
    port = ntohs(v6.sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

int Listen(const Options& options) {
  sockaddr_storage address{};
  socklen_t length = 0;
  auto& v4 = reinterpret_cast<sockaddr_in&>(address);
  auto& v6 = reinterpret_cast<sockaddr_in6&>(address);
  if (inet_pton(AF_INET, options.address.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(static_cast<std::uint16_t>(options.port));
    length = sizeof v4;
  } else if (inet_pton(AF_INET6, options.address.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(static_cast<std::uint16_t>(options.port));
    length = sizeof v6;
  } else {
    throw std::runtime_error("--address " + options.address + ": not an IPv4 or IPv6 address");
  }
  const int fd = socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 || listen(fd, 128) != 0) {
    const std::string error = std::strerror(errno);
    close(fd);
    throw std::runtime_error("listening on " + options.address + ":" +
                             std::to_string(options.port) + ": " + error);
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  sockaddr_storage bound{};
  socklen_t bound_length = sizeof bound;
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_length);
  std::cerr << "ncclguard-ras-standin: listening on " << PeerName(bound) << ", scenario "
            << options.scenario << std::endl;
  return fd;
}

int Serve(const Options& options) {
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);

  const int listener = Listen(options);
  std::vector<std::unique_ptr<Connection>> connections;
  while (g_stop == 0) {
    std::vector<pollfd> fds;
    fds.push_back({listener, POLLIN, 0});
    for (const auto& connection : connections) {
      const short events = static_cast<short>(POLLIN | (connection->out.empty() ? 0 : POLLOUT));
      fds.push_back({connection->fd, events, 0});
    }
    const int ready = poll(fds.data(), fds.size(), 500);
    if (ready < 0) {
      if (errno == EINTR) continue;
      std::cerr << "ncclguard-ras-standin: poll: " << std::strerror(errno) << std::endl;
      return 1;
    }
    std::vector<std::unique_ptr<Connection>> kept;
    for (std::size_t i = 0; i < connections.size(); ++i) {
      Connection& connection = *connections[i];
      const short revents = fds[i + 1].revents;
      bool open = true;
      if (revents & (POLLIN | POLLHUP | POLLERR)) open = Receive(connection, options);
      if (open && !connection.out.empty()) open = Send(connection);
      if (open && connection.finished && connection.out.empty()) open = false;
      if (open) {
        kept.push_back(std::move(connections[i]));
      } else {
        close(connection.fd);
      }
    }
    connections = std::move(kept);
    if (fds[0].revents & POLLIN) {
      for (;;) {
        sockaddr_storage address{};
        socklen_t length = sizeof address;
        const int fd = accept4(listener, reinterpret_cast<sockaddr*>(&address), &length,
                               SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        if (connections.size() >= kMaxConnections) {
          std::cerr << "ncclguard-ras-standin: " << PeerName(address) << ": over "
                    << kMaxConnections << " connections, closed" << std::endl;
          close(fd);
          continue;
        }
        auto connection = std::make_unique<Connection>();
        connection->fd = fd;
        connection->peer = PeerName(address);
        try {
          connection->silent = LoadScenario(options.scenario).silent;
        } catch (const std::exception&) {
          // Said when it asks for a report.
        }
        if (connection->silent) Log(*connection, "accepted, silent (no answer)");
        connections.push_back(std::move(connection));
      }
    }
  }
  for (const auto& connection : connections) close(connection->fd);
  close(listener);
  std::cerr << "ncclguard-ras-standin: stopped" << std::endl;
  return 0;
}

bool IsLoopback(const std::string& address) {
  in_addr v4{};
  return inet_pton(AF_INET, address.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

std::optional<Options> ParseOptions(int argc, char** argv, int& exit_code) {
  Options options;
  bool address_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      exit_code = 0;
      return std::nullopt;
    } else if (arg == "--scenario") {
      options.scenario = value();
    } else if (arg == "--port") {
      const std::string port = value();
      char* end = nullptr;
      const long number = std::strtol(port.c_str(), &end, 10);
      if (port.empty() || *end != '\0' || number < 0 || number > 65535) {
        throw std::invalid_argument("--port " + port + ": not a port");
      }
      options.port = static_cast<int>(number);
    } else if (arg == "--address") {
      options.address = value();
      address_given = true;
    } else if (arg == "--render") {
      options.render = true;
    } else if (arg == "--format") {
      const std::string format = value();
      if (format != "text" && format != "json") {
        throw std::invalid_argument("--format " + format + ": text or json");
      }
      options.json = format == "json";
    } else if (arg == "--status") {
      options.verbose = false;
    } else {
      throw std::invalid_argument("unknown argument " + arg + " (--help)");
    }
  }
  if (options.scenario.empty()) throw std::invalid_argument("--scenario PATH is required");
  if (!address_given && !IsLoopback(options.address)) {
    throw std::invalid_argument("the default address must be loopback");
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int exit_code = 0;
    const std::optional<Options> options = ParseOptions(argc, argv, exit_code);
    if (!options) return exit_code;
    if (options->render) {
      ncclguard::ras_fake::RasScenario scenario = LoadScenario(options->scenario);
      scenario.verbose = options->verbose;
      std::cout << (options->json ? ncclguard::ras_fake::RenderRasJson(scenario)
                                  : ncclguard::ras_fake::RenderRasText(scenario));
      return 0;
    }
    return Serve(*options);
  } catch (const std::exception& e) {
    std::cerr << "ncclguard-ras-standin: " << e.what() << std::endl;
    return 2;
  }
}
