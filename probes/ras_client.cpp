#include "probes/ras_client.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <utility>

#include "probes/netns.h"
#include "probes/socket.h"

namespace ncclguard::probes {
namespace {

using RasClock = std::chrono::steady_clock;

// NCCL_RAS_CLIENT_PROTOCOL in every release since 2.24.
constexpr std::string_view kRasClientHello = "CLIENT PROTOCOL 2\n";
// One recv of a report at most; a report of max_report_bytes takes max/64 KiB wakes.
constexpr std::size_t kRasReadChunk = 64 * 1024;

// Where an exchange stands: connecting, or waiting for the answer to a command.
enum class RasStep { kConnecting, kProtocol, kTimeout, kFormat, kReport, kDone };

// One connection attempt: "localhost" makes two, 127.0.0.1 and ::1.
struct RasDial {
  Socket socket;
  SocketAddress address;
  enum class State { kPending, kConnected, kFailed } state = State::kPending;
  int error = 0;
};

struct RasExchange {
  const RasQuery* query = nullptr;
  std::string endpoint;  // "127.0.0.1:28028", "localhost:28028", for the error sentences
  RasAnswer answer;
  RasStep step = RasStep::kConnecting;
  std::vector<RasDial> dials;  // while connecting
  Socket socket;               // once connected
  SocketAddress peer;          // the address that took the connection
  std::string out;             // the command being sent
  std::size_t sent = 0;
  std::string line;  // an answer being read, at most kMaxRasProtocolLine
  bool want_json = false;
  bool format_refused = false;  // SET FORMAT answered ERROR: the report comes as text
  bool retried = false;         // the one reconnection in text has been made
  int connection = 0;           // counts connections: work for an earlier one stops
};

bool SameLetters(std::string_view text, std::string_view upper) {
  return text.size() == upper.size() &&
         std::equal(text.begin(), text.end(), upper.begin(), [](char a, char b) {
           return (a >= 'a' && a <= 'z' ? static_cast<char>(a - 'a' + 'A') : a) == b;
         });
}

bool StartsWithLetters(std::string_view text, std::string_view upper) {
  return text.size() >= upper.size() && SameLetters(text.substr(0, upper.size()), upper);
}

// A server's words, fit for an error sentence: cut short, control and binary bytes as '?'.
std::string Quoted(std::string_view text) {
  constexpr std::size_t kShown = 120;
  std::string shown = "\"";
  for (const char c : text.substr(0, kShown)) shown += c >= ' ' && c <= '~' ? c : '?';
  return shown + (text.size() > kShown ? "...\"" : "\"");
}

std::string Millis(std::chrono::milliseconds duration) {
  return std::to_string(duration.count()) + " ms";
}

std::vector<SocketAddress> RasAddresses(const RasQuery& query) {
  std::vector<SocketAddress> addresses;
  if (query.port == 0) return addresses;
  for (const std::string& host : query.host == "localhost"
                                     ? std::vector<std::string>{"127.0.0.1", "::1"}
                                     : std::vector<std::string>{query.host}) {
    if (auto address = NumericAddress(host, query.port)) addresses.push_back(*address);
  }
  return addresses;
}

// Makes the socket and starts its connect; runs in the query's namespace.
RasDial StartDial(const SocketAddress& address) {
  RasDial dial;
  dial.address = address;
  dial.socket =
      Socket(::socket(address.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (dial.socket.fd() < 0) {
    dial.state = RasDial::State::kFailed;
    dial.error = errno;
  } else if (::connect(dial.socket.fd(), address.get(), address.length) == 0) {
    dial.state = RasDial::State::kConnected;
  } else if (errno != EINPROGRESS && errno != EINTR) {
    // EINTR: the connect goes on in the background, as EINPROGRESS says.
    dial.state = RasDial::State::kFailed;
    dial.error = errno;
  }
  return dial;
}

class RasSession {
 public:
  RasSession(const std::vector<RasQuery>& queries, std::chrono::milliseconds deadline,
             std::size_t max_report_bytes)
      : start_(RasClock::now()),
        end_(start_ + deadline),
        deadline_(deadline),
        max_report_bytes_(max_report_bytes),
        exchanges_(queries.size()),
        chunk_(kRasReadChunk) {
    for (std::size_t i = 0; i < queries.size(); ++i) {
      RasExchange& x = exchanges_[i];
      x.query = &queries[i];
      x.endpoint = queries[i].host.substr(0, 64) + ":" + std::to_string(queries[i].port);
      x.want_json = queries[i].json;
    }
  }

  std::vector<RasAnswer> Run() {
    DialAll();
    Drive();
    std::vector<RasAnswer> answers;
    answers.reserve(exchanges_.size());
    for (RasExchange& x : exchanges_) {
      if (x.step != RasStep::kDone) Finish(x, RasAnswerStatus::TimedOut, TimedOutWhy(x));
      answers.push_back(std::move(x.answer));
    }
    return answers;
  }

 private:
  // Every query's connect, started in its namespace: one thread a distinct namespace.
  void DialAll() {
    std::map<std::string, std::vector<RasExchange*>> by_namespace;
    for (RasExchange& x : exchanges_) {
      if (RasAddresses(*x.query).empty()) {
        Finish(x, RasAnswerStatus::SocketError,
               "\"" + x.endpoint +
                   "\": the host is not a numeric IPv4 or IPv6 address or localhost, or the " +
                   "port is 0");
        continue;
      }
      by_namespace[x.query->netns].push_back(&x);
    }
    for (auto& [netns, group] : by_namespace) {
      Dial(netns, group, [](const RasExchange& x) { return RasAddresses(*x.query); });
    }
  }

  template <typename AddressesOf>
  void Dial(const std::string& netns, const std::vector<RasExchange*>& group,
            const AddressesOf& addresses_of) {
    const auto dial = [&] {
      for (RasExchange* x : group) {
        for (const SocketAddress& address : addresses_of(*x))
          x->dials.push_back(StartDial(address));
      }
    };
    if (netns.empty()) {
      dial();
    } else {
      try {
        RunInNetworkNamespace(netns, dial);
      } catch (const std::exception& e) {
        for (RasExchange* x : group) {
          if (x->dials.empty()) Finish(*x, RasAnswerStatus::NamespaceError, e.what());
        }
      }
    }
    for (RasExchange* x : group) {
      if (x->step == RasStep::kConnecting) Settle(*x);
    }
  }

  void Drive() {
    std::vector<pollfd> polled;
    // Whose each pollfd is: the exchange, its dial (none once connected), its connection.
    struct Owner {
      RasExchange* x;
      RasDial* dial;
      int connection;
    };
    std::vector<Owner> owner;
    while (true) {
      polled.clear();
      owner.clear();
      for (RasExchange& x : exchanges_) {
        if (x.step == RasStep::kDone) continue;
        if (x.step == RasStep::kConnecting) {
          for (RasDial& d : x.dials) {
            if (d.state != RasDial::State::kPending) continue;
            polled.push_back({d.socket.fd(), POLLOUT, 0});
            owner.push_back({&x, &d, x.connection});
          }
          continue;
        }
        const bool sending = x.sent < x.out.size();
        polled.push_back({x.socket.fd(), static_cast<short>(POLLIN | (sending ? POLLOUT : 0)), 0});
        owner.push_back({&x, nullptr, x.connection});
      }
      const RasClock::time_point now = RasClock::now();
      if (polled.empty() || now >= end_) return;
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(end_ - now);
      const int wait =
          static_cast<int>(std::min<std::chrono::milliseconds::rep>(left.count(), 60'000));
      if (::poll(polled.data(), polled.size(), wait) < 0) {
        const int error = errno;
        if (error == EINTR) continue;
        for (const Owner& o : owner) {
          if (o.x->step != RasStep::kDone) {
            Finish(*o.x, RasAnswerStatus::SocketError,
                   "poll: " + std::string(std::strerror(error)));
          }
        }
        return;
      }
      for (std::size_t k = 0; k < polled.size(); ++k) {
        auto [x, dial, connection] = owner[k];
        const short events = polled[k].revents;
        // An exchange ended, or started again, by an earlier pollfd's work is not this one's.
        if (events == 0 || x->step == RasStep::kDone || x->connection != connection) continue;
        if (dial != nullptr) {
          if (x->step != RasStep::kConnecting) continue;  // a sibling dial already won
          int error = 0;
          socklen_t length = sizeof error;
          if (::getsockopt(dial->socket.fd(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
            error = errno;
          }
          dial->state = error == 0 ? RasDial::State::kConnected : RasDial::State::kFailed;
          dial->error = error;
          Settle(*x);
          continue;
        }
        if ((events & POLLOUT) != 0) Send(*x);
        // Send may have ended the exchange, or started it again on a new connection.
        if (x->step == RasStep::kDone || x->step == RasStep::kConnecting) continue;
        if ((events & (POLLIN | POLLHUP | POLLERR)) != 0) Receive(*x);
      }
    }
  }

  // A connecting exchange after one of its dials changed: the first connected dial wins; when
  // every dial failed, the answer says how.
  void Settle(RasExchange& x) {
    for (RasDial& d : x.dials) {
      if (d.state != RasDial::State::kConnected) continue;
      x.socket = std::move(d.socket);
      x.peer = d.address;
      x.dials.clear();
      x.step = RasStep::kProtocol;
      Command(x, std::string(kRasClientHello));
      return;
    }
    if (std::any_of(x.dials.begin(), x.dials.end(),
                    [](const RasDial& d) { return d.state == RasDial::State::kPending; })) {
      return;
    }
    const bool refused = std::any_of(x.dials.begin(), x.dials.end(),
                                     [](const RasDial& d) { return d.error == ECONNREFUSED; });
    const int error = x.dials.empty() ? 0 : x.dials.front().error;
    if (refused) {
      Finish(x, RasAnswerStatus::Refused,
             "nothing listens on " + x.endpoint + " (connection refused)");
    } else {
      Finish(x, RasAnswerStatus::SocketError,
             "connecting to " + x.endpoint + ": " + std::strerror(error));
    }
  }

  // Commands are a few dozen bytes: a fresh socket's buffer takes them at once, but a partial
  // send is carried on at the next POLLOUT all the same.
  void Command(RasExchange& x, std::string command) {
    x.out = std::move(command);
    x.sent = 0;
    Send(x);
  }

  void Send(RasExchange& x) {
    while (x.sent < x.out.size()) {
      const ssize_t put = ::send(x.socket.fd(), x.out.data() + x.sent, x.out.size() - x.sent,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
      if (put >= 0) {
        x.sent += static_cast<std::size_t>(put);
        continue;
      }
      const int error = errno;
      if (error == EINTR) continue;
      if (error == EAGAIN || error == EWOULDBLOCK) return;
      if (error == EPIPE || error == ECONNRESET) {
        Ended(x, "reset");
      } else {
        Finish(x, RasAnswerStatus::SocketError,
               "sending to " + x.endpoint + ": " + std::strerror(error));
      }
      return;
    }
  }

  void Receive(RasExchange& x) {
    // Protocol lines are read up to their bound, the report up to one byte past its own (the
    // byte that says it is too large).
    const std::size_t room =
        x.step == RasStep::kReport
            ? std::min(chunk_.size(), max_report_bytes_ - x.answer.report.size() + 1)
            : kMaxRasProtocolLine - x.line.size();
    const ssize_t got = ::recv(x.socket.fd(), chunk_.data(), room, MSG_DONTWAIT);
    if (got < 0) {
      const int error = errno;
      if (error == EINTR || error == EAGAIN || error == EWOULDBLOCK) return;
      if (error == ECONNRESET) {
        Ended(x, "reset");
      } else {
        Finish(x, RasAnswerStatus::SocketError,
               "reading from " + x.endpoint + ": " + std::strerror(error));
      }
      return;
    }
    if (got == 0) {
      Ended(x, "closed");
      return;
    }
    const std::string_view bytes(chunk_.data(), static_cast<std::size_t>(got));
    if (x.step == RasStep::kReport) {
      AppendReport(x, bytes);
      return;
    }
    x.line.append(bytes);
    Lines(x, x.line.size() - bytes.size());
  }

  // Answers in `line` from `searched` on; what follows the last one stays for the next (or, once
  // STATUS is sent, starts the report).
  void Lines(RasExchange& x, std::size_t searched) {
    const int connection = x.connection;
    std::size_t begin = 0;
    while (IsWaitingForAnswer(x) && x.connection == connection) {
      const std::size_t newline = x.line.find('\n', std::max(begin, searched));
      if (newline == std::string::npos) break;
      std::string_view answer(x.line.data() + begin, newline - begin);
      if (!answer.empty() && answer.back() == '\r') answer.remove_suffix(1);
      begin = newline + 1;
      Answer(x, answer);
    }
    // Done, or started again on a new connection (an answer's command could not be sent):
    // `line` belongs to no one now.
    if (x.step == RasStep::kDone || x.connection != connection) return;
    x.line.erase(0, begin);  // at most once an answer, and there are three
    if (x.step == RasStep::kReport) {
      const std::string rest = std::exchange(x.line, std::string());
      AppendReport(x, rest);
    } else if (x.line.size() >= kMaxRasProtocolLine) {
      Finish(x, RasAnswerStatus::ProtocolError,
             "an answer longer than " + std::to_string(kMaxRasProtocolLine) + " bytes from " +
                 x.endpoint + ": " + Quoted(x.line));
    }
  }

  static bool IsWaitingForAnswer(const RasExchange& x) {
    return x.step == RasStep::kProtocol || x.step == RasStep::kTimeout ||
           x.step == RasStep::kFormat;
  }

  void Answer(RasExchange& x, std::string_view answer) {
    const RasQuery& query = *x.query;
    switch (x.step) {
      case RasStep::kProtocol: {
        constexpr std::string_view kServer = "SERVER PROTOCOL ";
        const std::string_view number =
            StartsWithLetters(answer, kServer) ? answer.substr(kServer.size()) : "";
        if (number.empty() || number.size() > 6 ||
            !std::all_of(number.begin(), number.end(),
                         [](char c) { return c >= '0' && c <= '9'; })) {
          Finish(x, RasAnswerStatus::ProtocolError,
                 x.endpoint + " is not NCCL's RAS service: it answered CLIENT PROTOCOL 2 with " +
                     Quoted(answer));
          return;
        }
        // Another protocol number is spoken to all the same, as ncclras does.
        x.answer.server_protocol = std::stoi(std::string(number));
        if (query.server_timeout_s >= 0) {
          x.step = RasStep::kTimeout;
          Command(x, "TIMEOUT " + std::to_string(query.server_timeout_s) + "\n");
          return;
        }
        AfterTimeout(x);
        return;
      }
      case RasStep::kTimeout:
        if (!SameLetters(answer, "OK")) {
          Finish(x, RasAnswerStatus::ProtocolError,
                 "TIMEOUT " + std::to_string(query.server_timeout_s) +
                     ": server said: " + Quoted(answer));
          return;
        }
        AfterTimeout(x);
        return;
      case RasStep::kFormat:
        if (SameLetters(answer, "OK")) {
          x.answer.json = true;
        } else if (StartsWithLetters(answer, "ERROR")) {
          // NCCL before 2.28.7: "ERROR: Unknown command SET FORMAT json", the connection kept.
          x.format_refused = true;
        } else {
          Finish(x, RasAnswerStatus::ProtocolError,
                 "SET FORMAT json: server said: " + Quoted(answer));
          return;
        }
        AskStatus(x);
        return;
      case RasStep::kConnecting:
      case RasStep::kReport:
      case RasStep::kDone:
        return;
    }
  }

  void AfterTimeout(RasExchange& x) {
    if (x.want_json) {
      x.step = RasStep::kFormat;
      Command(x, "SET FORMAT json\n");
    } else {
      AskStatus(x);
    }
  }

  void AskStatus(RasExchange& x) {
    x.step = RasStep::kReport;
    Command(x, x.query->verbose ? "VERBOSE STATUS\n" : "STATUS\n");
  }

  // Bounded growth: the capacity never passes max_report_bytes. A doubling string's would, and
  // libstdc++'s reserve rounds a small growth up to double the old capacity: a new string of
  // exactly the capacity wanted is made instead.
  void AppendReport(RasExchange& x, std::string_view bytes) {
    if (x.step == RasStep::kDone) return;
    std::string& report = x.answer.report;
    const std::size_t room = max_report_bytes_ - report.size();
    const std::size_t taken = std::min(room, bytes.size());
    if (report.size() + taken > report.capacity()) {
      std::string grown;
      grown.reserve(
          std::min(max_report_bytes_, std::max(2 * report.capacity(), report.size() + taken)));
      grown = report;
      report.swap(grown);
    }
    report.append(bytes.substr(0, taken));
    if (bytes.size() > room) {
      Finish(x, RasAnswerStatus::TooLarge,
             "the report from " + x.endpoint + " passed " + std::to_string(max_report_bytes_) +
                 " bytes; its first " + std::to_string(max_report_bytes_) + " are kept");
    }
  }

  // The server closed (or reset) the connection. In the report that is its end: RAS closes
  // after the report, and a report cut short is handed over as it came (the reader marks it
  // truncated). Before it, the exchange failed, unless SET FORMAT json was what the server could
  // not take: then once more in text, on a new connection.
  void Ended(RasExchange& x, const char* how) {
    const bool report_step = x.step == RasStep::kReport;
    if (report_step && !x.answer.report.empty()) {
      Finish(x, RasAnswerStatus::Answered, "");
      return;
    }
    const bool json_refused = x.step == RasStep::kFormat || (report_step && x.format_refused);
    if (json_refused && !x.retried) {
      RetryInText(x);
      return;
    }
    Finish(x, RasAnswerStatus::ProtocolError,
           x.endpoint + " " + how + " the connection " +
               (report_step ? std::string("without a report") : "before answering " + Awaited(x)));
  }

  void RetryInText(RasExchange& x) {
    x.retried = true;
    ++x.connection;
    x.want_json = false;
    x.format_refused = false;
    x.answer.json = false;
    x.answer.server_protocol = 0;
    x.answer.report.clear();
    x.line.clear();
    x.out.clear();
    x.sent = 0;
    x.socket = Socket();
    x.step = RasStep::kConnecting;
    const SocketAddress peer = x.peer;
    Dial(x.query->netns, {&x}, [&peer](const RasExchange&) { return std::vector{peer}; });
  }

  static std::string Awaited(const RasExchange& x) {
    switch (x.step) {
      case RasStep::kProtocol:
        return "CLIENT PROTOCOL 2";
      case RasStep::kTimeout:
        return "TIMEOUT " + std::to_string(x.query->server_timeout_s);
      case RasStep::kFormat:
        return "SET FORMAT json";
      case RasStep::kReport:
        return x.query->verbose ? "VERBOSE STATUS" : "STATUS";
      case RasStep::kConnecting:
      case RasStep::kDone:
        break;
    }
    return "the connection";
  }

  std::string TimedOutWhy(const RasExchange& x) const {
    const std::string within = " within " + Millis(deadline_);
    switch (x.step) {
      case RasStep::kConnecting:
        return "no connection to " + x.endpoint + within;
      case RasStep::kReport:
        return x.answer.report.empty()
                   ? "no report from " + x.endpoint + within
                   : "the report from " + x.endpoint + " was still coming after " +
                         Millis(deadline_) + " (" + std::to_string(x.answer.report.size()) +
                         " bytes kept)";
      default:
        return "no answer to " + Awaited(x) + " from " + x.endpoint + within;
    }
  }

  void Finish(RasExchange& x, RasAnswerStatus status, std::string error) {
    x.step = RasStep::kDone;
    x.answer.status = status;
    x.answer.error = std::move(error);
    x.answer.took = std::chrono::duration_cast<std::chrono::milliseconds>(RasClock::now() - start_);
    x.socket = Socket();
    x.dials.clear();
    x.line = std::string();
    x.out = std::string();
  }

  const RasClock::time_point start_;
  const RasClock::time_point end_;
  const std::chrono::milliseconds deadline_;
  const std::size_t max_report_bytes_;
  std::vector<RasExchange> exchanges_;
  std::vector<char> chunk_;  // one read buffer for every exchange
};

}  // namespace

std::optional<std::pair<std::string, std::uint16_t>> ParseRasAddress(std::string_view address) {
  const std::size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  unsigned port = 0;
  const std::string_view digits = address.substr(colon + 1);
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (error != std::errc() || end != digits.data() + digits.size() || port == 0 || port > 65535) {
    return std::nullopt;
  }
  return std::make_pair(std::string(host), static_cast<std::uint16_t>(port));
}

std::string_view RasAnswerStatusName(RasAnswerStatus status) {
  switch (status) {
    case RasAnswerStatus::Answered:
      return "Answered";
    case RasAnswerStatus::Refused:
      return "Refused";
    case RasAnswerStatus::TimedOut:
      return "TimedOut";
    case RasAnswerStatus::ProtocolError:
      return "ProtocolError";
    case RasAnswerStatus::TooLarge:
      return "TooLarge";
    case RasAnswerStatus::NamespaceError:
      return "NamespaceError";
    case RasAnswerStatus::SocketError:
      return "SocketError";
  }
  return "SocketError";
}

std::vector<RasAnswer> QueryRas(const std::vector<RasQuery>& queries,
                                std::chrono::milliseconds deadline, std::size_t max_report_bytes) {
  return RasSession(queries, deadline, max_report_bytes).Run();
}

}  // namespace ncclguard::probes
