#include "probes/peer_tcp.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "core/errors.h"
#include "probes/socket.h"

namespace ncclguard::probes {
namespace {

using Clock = std::chrono::steady_clock;

// The hello: this prefix, 16 hex digits that make each connection's echo its own, a newline.
constexpr std::string_view kHelloPrefix = "NCCLGUARD-PEER 1 ";
constexpr std::size_t kHelloBytes = kHelloPrefix.size() + 16 + 1;

std::uint16_t PortNumber(std::string_view text, std::string_view whole) {
  unsigned value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value == 0 ||
      value > 65535) {
    throw core::InputError("ports \"" + std::string(whole.substr(0, 64)) + "\": \"" +
                           std::string(text.substr(0, 16)) + "\" is not a port (1-65535)");
  }
  return static_cast<std::uint16_t>(value);
}

SocketAddress PeerAddress(const std::string& host, std::uint16_t port) {
  if (auto address = NumericAddress(host, port)) return *address;
  throw core::InputError("\"" + host.substr(0, 64) + "\" is not a numeric IPv4 or IPv6 address");
}

std::string ErrorText(int error) { return std::strerror(error); }

std::string Hello(std::uint64_t nonce) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hello(kHelloPrefix);
  for (int shift = 60; shift >= 0; shift -= 4) hello += kHex[(nonce >> shift) & 0xf];
  hello += '\n';
  return hello;
}

bool IsHello(std::string_view text) {
  if (text.size() != kHelloBytes || text.substr(0, kHelloPrefix.size()) != kHelloPrefix ||
      text.back() != '\n') {
    return false;
  }
  return std::all_of(text.begin() + static_cast<std::ptrdiff_t>(kHelloPrefix.size()),
                     text.end() - 1,
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

int PollMillis(Clock::time_point deadline, std::chrono::milliseconds at_most) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp(left, std::chrono::milliseconds(0), at_most).count());
}

}  // namespace

std::vector<std::uint16_t> ParsePeerPorts(std::string_view text) {
  std::set<std::uint16_t> ports;
  std::string_view rest = text;
  if (rest.empty()) throw core::InputError("ports: none given");
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const std::size_t dash = item.find('-');
    const std::uint16_t first = PortNumber(item.substr(0, dash), text);
    const std::uint16_t last =
        dash == std::string_view::npos ? first : PortNumber(item.substr(dash + 1), text);
    if (last < first) {
      throw core::InputError("ports \"" + std::string(text.substr(0, 64)) + "\": the range " +
                             std::to_string(first) + "-" + std::to_string(last) +
                             " runs backwards");
    }
    // Counted before it is expanded: "1-65535" fails at once.
    if (static_cast<std::size_t>(last - first) + 1 > kMaxPeerPorts) {
      throw core::InputError("ports \"" + std::string(text.substr(0, 64)) + "\": more than " +
                             std::to_string(kMaxPeerPorts) + " ports (a sample, not a scan)");
    }
    for (unsigned port = first; port <= last; ++port)
      ports.insert(static_cast<std::uint16_t>(port));
    if (ports.size() > kMaxPeerPorts) {
      throw core::InputError("ports \"" + std::string(text.substr(0, 64)) + "\": more than " +
                             std::to_string(kMaxPeerPorts) + " ports (a sample, not a scan)");
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return {ports.begin(), ports.end()};
}

std::vector<std::uint16_t> SamplePorts(std::uint16_t first, std::uint16_t last, std::size_t count,
                                       std::uint64_t seed) {
  if (last < first || count == 0) return {};
  const std::size_t span = static_cast<std::size_t>(last - first) + 1;
  if (count >= span) {
    std::vector<std::uint16_t> all;
    for (std::size_t i = 0; i < span; ++i) all.push_back(static_cast<std::uint16_t>(first + i));
    return all;
  }
  // One port in each of `count` equal slices, at an offset within the slice set by the seed.
  const std::size_t slice = span / count;
  const std::size_t offset = static_cast<std::size_t>(seed % slice);
  std::vector<std::uint16_t> ports;
  for (std::size_t i = 0; i < count; ++i) {
    ports.push_back(static_cast<std::uint16_t>(first + i * slice + offset));
  }
  return ports;
}

std::pair<std::uint16_t, std::uint16_t> ParsePortRange(std::string_view text) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n'; };
  std::vector<std::string_view> fields;
  std::size_t at = 0;
  while (at < text.size() && fields.size() < 3) {
    while (at < text.size() && is_space(text[at])) ++at;
    std::size_t end = at;
    while (end < text.size() && !is_space(text[end])) ++end;
    if (end > at) fields.push_back(text.substr(at, end - at));
    at = end;
  }
  if (fields.size() != 2) {
    throw core::InputError("ip_local_port_range: expected two ports, read \"" +
                           std::string(text.substr(0, 32)) + "\"");
  }
  const std::uint16_t first = PortNumber(fields[0], text);
  const std::uint16_t last = PortNumber(fields[1], text);
  if (last < first) throw core::InputError("ip_local_port_range: the range runs backwards");
  return {first, last};
}

std::pair<std::uint16_t, std::uint16_t> ReadLocalPortRange() {
  constexpr const char* kPath = "/proc/sys/net/ipv4/ip_local_port_range";
  std::ifstream file(kPath);
  std::stringstream text;
  text << file.rdbuf();
  if (!file) throw core::InputError(std::string("cannot read ") + kPath);
  return ParsePortRange(text.str());
}

std::string_view PortOutcomeName(PortOutcome outcome) {
  switch (outcome) {
    case PortOutcome::kPassed:
      return "passed";
    case PortOutcome::kRefused:
      return "refused";
    case PortOutcome::kTimedOut:
      return "timed-out";
    case PortOutcome::kUnreachable:
      return "unreachable";
    case PortOutcome::kReset:
      return "reset";
    case PortOutcome::kWrongAnswer:
      return "wrong-answer";
  }
  return "timed-out";
}

PeerServeSummary ServePeerPorts(const PeerServeOptions& options, const std::atomic<bool>* stop) {
  if (options.ports.empty()) throw core::InputError("serve: no ports");
  if (options.ports.size() > kMaxPeerPorts) {
    throw core::InputError("serve: more than " + std::to_string(kMaxPeerPorts) + " ports");
  }
  PeerServeSummary summary;
  std::vector<Socket> listeners;
  for (const std::uint16_t port : options.ports) {
    const SocketAddress address = PeerAddress(options.address, port);
    Socket listener(
        ::socket(address.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    const int one = 1;
    if (listener.fd() < 0 ||
        ::setsockopt(listener.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        ::bind(listener.fd(), reinterpret_cast<const sockaddr*>(&address.storage),
               address.length) != 0 ||
        ::listen(listener.fd(), 64) != 0) {
      summary.unserved.push_back(std::to_string(port) + ": " + ErrorText(errno));
      continue;
    }
    summary.served.push_back(port);
    listeners.push_back(std::move(listener));
  }
  if (listeners.empty()) {
    throw core::InputError("serve: no port could be served (" + summary.unserved.front() + ")");
  }

  struct Connection {
    Socket socket;
    std::string said;
    Clock::time_point deadline;
  };
  std::vector<Connection> connections;
  const Clock::time_point end = Clock::now() + options.duration;
  std::vector<pollfd> polled;
  while (Clock::now() < end && (stop == nullptr || !stop->load())) {
    polled.clear();
    const bool room = connections.size() < options.max_connections;
    for (const Socket& l : listeners) {
      polled.push_back({l.fd(), static_cast<short>(room ? POLLIN : 0), 0});
    }
    for (const Connection& c : connections) polled.push_back({c.socket.fd(), POLLIN, 0});
    // Wakes at least every 100 ms to see `stop`.
    if (::poll(polled.data(), polled.size(), PollMillis(end, std::chrono::milliseconds(100))) < 0 &&
        errno != EINTR) {
      break;
    }
    const Clock::time_point now = Clock::now();
    // Connections first (their indices follow the listeners'); then new ones.
    std::vector<Connection> open;
    for (std::size_t i = 0; i < connections.size(); ++i) {
      Connection& c = connections[i];
      const short events = polled[listeners.size() + i].revents;
      bool done = false;
      if ((events & (POLLIN | POLLERR | POLLHUP)) != 0) {
        char buffer[kHelloBytes];
        const ssize_t got =
            ::recv(c.socket.fd(), buffer, kHelloBytes - c.said.size(), MSG_DONTWAIT);
        if (got > 0) {
          c.said.append(buffer, static_cast<std::size_t>(got));
          if (c.said.size() == kHelloBytes || c.said.back() == '\n') {
            if (IsHello(c.said) &&
                ::send(c.socket.fd(), c.said.data(), c.said.size(), MSG_NOSIGNAL | MSG_DONTWAIT) ==
                    static_cast<ssize_t>(c.said.size())) {
              ++summary.answered;
            } else {
              ++summary.dropped;
            }
            done = true;
          }
        } else if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          ++summary.dropped;
          done = true;
        }
      }
      if (!done && now >= c.deadline) {
        ++summary.dropped;
        done = true;
      }
      if (!done) open.push_back(std::move(c));
    }
    connections = std::move(open);
    for (std::size_t i = 0; i < listeners.size(); ++i) {
      if ((polled[i].revents & POLLIN) == 0) continue;
      while (connections.size() < options.max_connections) {
        const int fd = ::accept4(listeners[i].fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        connections.push_back({Socket(fd), {}, now + options.hello_timeout});
      }
    }
  }
  return summary;
}

std::vector<PortTest> TestPeerPorts(const std::string& host,
                                    const std::vector<std::uint16_t>& ports,
                                    std::chrono::milliseconds timeout) {
  if (ports.size() > kMaxPeerPorts) {
    throw core::InputError("test: more than " + std::to_string(kMaxPeerPorts) + " ports");
  }
  enum class Step { kConnecting, kReading, kDone };
  struct Attempt {
    Socket socket;
    Step step = Step::kConnecting;
    std::string hello;
    std::string heard;
  };
  const Clock::time_point start = Clock::now();
  const Clock::time_point end = start + timeout;
  std::vector<PortTest> results(ports.size());
  std::vector<Attempt> attempts(ports.size());
  const auto finish = [&](std::size_t i, PortOutcome outcome, std::string detail) {
    results[i].outcome = outcome;
    results[i].detail = std::move(detail);
    results[i].took = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
    attempts[i].step = Step::kDone;
    attempts[i].socket = Socket();
  };
  // A connected socket: send the hello (a few dozen bytes fit any fresh socket's buffer).
  const auto connected = [&](std::size_t i) {
    Attempt& a = attempts[i];
    if (::send(a.socket.fd(), a.hello.data(), a.hello.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
        static_cast<ssize_t>(a.hello.size())) {
      finish(i, PortOutcome::kReset, "sending the hello: " + ErrorText(errno));
      return;
    }
    a.step = Step::kReading;
  };
  const auto failed_connect = [&](std::size_t i, int error) {
    if (error == ECONNREFUSED) {
      finish(i, PortOutcome::kRefused, ErrorText(error));
    } else if (error == ETIMEDOUT) {
      finish(i, PortOutcome::kTimedOut, ErrorText(error));
    } else {
      finish(i, PortOutcome::kUnreachable, ErrorText(error));
    }
  };

  for (std::size_t i = 0; i < ports.size(); ++i) {
    results[i].port = ports[i];
    const SocketAddress address = PeerAddress(host, ports[i]);
    Attempt& a = attempts[i];
    a.hello = Hello((static_cast<std::uint64_t>(start.time_since_epoch().count()) << 16) ^
                    (static_cast<std::uint64_t>(i) << 1) ^ ports[i]);
    a.socket =
        Socket(::socket(address.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (a.socket.fd() < 0) {
      finish(i, PortOutcome::kUnreachable, "socket: " + ErrorText(errno));
      continue;
    }
    if (::connect(a.socket.fd(), reinterpret_cast<const sockaddr*>(&address.storage),
                  address.length) == 0) {
      connected(i);
    } else if (errno != EINPROGRESS) {
      failed_connect(i, errno);
    }
  }

  std::vector<pollfd> polled;
  std::vector<std::size_t> index;
  while (Clock::now() < end) {
    polled.clear();
    index.clear();
    for (std::size_t i = 0; i < attempts.size(); ++i) {
      const Attempt& a = attempts[i];
      if (a.step == Step::kDone) continue;
      polled.push_back(
          {a.socket.fd(), static_cast<short>(a.step == Step::kConnecting ? POLLOUT : POLLIN), 0});
      index.push_back(i);
    }
    if (polled.empty()) break;
    if (::poll(polled.data(), polled.size(), PollMillis(end, timeout)) < 0 && errno != EINTR) {
      break;
    }
    for (std::size_t k = 0; k < polled.size(); ++k) {
      const std::size_t i = index[k];
      Attempt& a = attempts[i];
      if (polled[k].revents == 0) continue;
      if (a.step == Step::kConnecting) {
        int error = 0;
        socklen_t length = sizeof error;
        ::getsockopt(a.socket.fd(), SOL_SOCKET, SO_ERROR, &error, &length);
        if (error == 0) {
          connected(i);
        } else {
          failed_connect(i, error);
        }
        continue;
      }
      char buffer[kHelloBytes];
      const ssize_t got = ::recv(a.socket.fd(), buffer, kHelloBytes - a.heard.size(), MSG_DONTWAIT);
      if (got > 0) {
        a.heard.append(buffer, static_cast<std::size_t>(got));
        if (a.heard.size() == a.hello.size() || a.heard.back() == '\n') {
          if (a.heard == a.hello) {
            finish(i, PortOutcome::kPassed, "");
          } else {
            finish(i, PortOutcome::kWrongAnswer, "another service answers on the port");
          }
        }
      } else if (got == 0) {
        finish(i, PortOutcome::kReset, "closed before the echo");
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        finish(i, PortOutcome::kReset, ErrorText(errno));
      }
    }
  }
  for (std::size_t i = 0; i < attempts.size(); ++i) {
    if (attempts[i].step == Step::kConnecting) {
      finish(i, PortOutcome::kTimedOut, "no answer to the connection within the timeout");
    } else if (attempts[i].step == Step::kReading) {
      finish(i, PortOutcome::kWrongAnswer, "connected, no echo within the timeout");
    }
  }
  return results;
}

}  // namespace ncclguard::probes
