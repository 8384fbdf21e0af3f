// The RAS client (probes/ras_client.h) against fake RAS servers on 127.0.0.1: servers that speak
// as NCCL does (2.28.7 and later, and older ones without SET FORMAT), and hostile ones that are
// silent, endless, slow or speak something else. Every call returns by its deadline, each answer
// says what happened, and memory stays within the report limit.
#include "probes/ras_client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "loopback_port.h"

namespace ncclguard::test {
namespace {

using namespace std::chrono_literals;
using probes::RasAnswer;
using probes::RasAnswerStatus;
using probes::RasQuery;
using RasTestClock = std::chrono::steady_clock;

// The server's side of one connection: blocking in short waits, so that the server's stop ends
// it; every byte the client sent is kept.
class FakeRasConnection {
 public:
  FakeRasConnection(int fd, const std::atomic<bool>& stop) : fd_(fd), stop_(stop) {}
  ~FakeRasConnection() { ::close(fd_); }
  FakeRasConnection(const FakeRasConnection&) = delete;
  FakeRasConnection& operator=(const FakeRasConnection&) = delete;

  // The next line without its '\n'; none when the client closed or the server stops.
  std::optional<std::string> ReadLine() {
    while (true) {
      const std::size_t newline = pending_.find('\n');
      if (newline != std::string::npos) {
        std::string line = pending_.substr(0, newline);
        pending_.erase(0, newline + 1);
        return line;
      }
      if (!Wait(POLLIN)) return std::nullopt;
      char buffer[4096];
      const ssize_t got = ::recv(fd_, buffer, sizeof buffer, MSG_DONTWAIT);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) return std::nullopt;
      if (got > 0) {
        received.append(buffer, static_cast<std::size_t>(got));
        pending_.append(buffer, static_cast<std::size_t>(got));
      }
    }
  }

  // False once the client is gone or the server stops.
  bool Write(std::string_view bytes) {
    while (!bytes.empty()) {
      if (!Wait(POLLOUT)) return false;
      const ssize_t put = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (put < 0 && errno != EAGAIN && errno != EINTR) return false;
      if (put > 0) bytes.remove_prefix(static_cast<std::size_t>(put));
    }
    return true;
  }

  // Whether the client sent its next command before this one was answered (ncclras waits).
  bool ClientRanAhead() {
    std::this_thread::sleep_for(5ms);
    char byte = 0;
    return !pending_.empty() || ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
  }

  std::string received;

 private:
  bool Wait(short events) {
    while (!stop_) {
      pollfd polled{fd_, events, 0};
      if (::poll(&polled, 1, 50) > 0) return true;
    }
    return false;
  }

  int fd_;
  const std::atomic<bool>& stop_;
  std::string pending_;
};

using RasBehaviour = std::function<void(FakeRasConnection&)>;

// A server on 127.0.0.1 (an ephemeral port) that runs `behaviour` on each connection in turn.
class FakeRas {
 public:
  explicit FakeRas(RasBehaviour behaviour) {
    const LoopbackListener listener = ListenOnLoopback(16);
    listener_ = listener.fd;
    port_ = listener.port;
    thread_ = std::thread([this, behaviour = std::move(behaviour)] {
      while (!stop_) {
        pollfd polled{listener_, POLLIN, 0};
        if (::poll(&polled, 1, 50) <= 0) continue;
        const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) continue;
        FakeRasConnection connection(fd, stop_);
        behaviour(connection);
        const std::lock_guard lock(mutex_);
        sessions_.push_back(std::move(connection.received));
      }
    });
  }
  ~FakeRas() {
    Stop();
    thread_.join();
    ::close(listener_);
  }
  FakeRas(const FakeRas&) = delete;
  FakeRas& operator=(const FakeRas&) = delete;

  // Stops without waiting (the destructor waits): many servers stop at once.
  void Stop() { stop_ = true; }
  std::uint16_t port() const { return port_; }
  RasQuery Query() const {
    RasQuery query;
    query.port = port_;
    return query;
  }
  // What the client sent on each connection that has ended.
  std::vector<std::string> Sessions() {
    const std::lock_guard lock(mutex_);
    return sessions_;
  }
  // The sessions once `count` have ended (the server may still be closing the last).
  std::vector<std::string> SessionsWhen(std::size_t count) {
    for (int i = 0; i < 100 && Sessions().size() < count; ++i) std::this_thread::sleep_for(20ms);
    return Sessions();
  }

 private:
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<std::string> sessions_;
  std::thread thread_;
};

struct NcclLikeServer {
  bool knows_json = true;           // 2.28.7 and later
  bool closes_after_error = false;  // not NCCL: a server that hangs up on a command it lacks
  std::string protocol = "2";
  std::string timeout_answer = "OK";
  std::atomic<int>* ran_ahead = nullptr;  // counts commands sent before the last was answered
  // Sends the report (json: whether SET FORMAT json was accepted); the connection closes after.
  std::function<void(FakeRasConnection&, bool json)> report;
};

// Answers as NCCL's RAS service does (src/ras/client_support.cc): one answer a command line, the
// commands case-insensitive, the report after STATUS and then the connection closed.
RasBehaviour NcclLike(NcclLikeServer server) {
  return [server = std::move(server)](FakeRasConnection& connection) {
    bool json = false;
    while (const auto line = connection.ReadLine()) {
      if (server.ran_ahead != nullptr && connection.ClientRanAhead()) ++*server.ran_ahead;
      std::string command;
      for (const char c : *line) command += static_cast<char>(std::tolower(c));
      if (command.rfind("client protocol ", 0) == 0) {
        connection.Write("SERVER PROTOCOL " + server.protocol + "\n");
      } else if (command.rfind("timeout ", 0) == 0) {
        connection.Write(server.timeout_answer + "\n");
      } else if (command == "set format json" && server.knows_json) {
        json = true;
        connection.Write("OK\n");
      } else if (command == "status" || command == "verbose status") {
        server.report(connection, json);
        return;
      } else {
        connection.Write("ERROR: Unknown command " + *line + "\n");
        if (server.closes_after_error) return;
      }
    }
  };
}

constexpr std::string_view kTextReport =
    "NCCL version 2.26.5 compiled with CUDA 12.8\n\nJob summary\n===========\n\n"
    "  Nodes  Processes         GPUs  Processes     GPUs\n";
constexpr std::string_view kJsonReport = R"({"nccl_version": "2.28.9", "communicators": []})";

// A server that sends these reports whole.
NcclLikeServer Reporting(std::string text = std::string(kTextReport),
                         std::string json = std::string(kJsonReport)) {
  NcclLikeServer server;
  server.report = [text = std::move(text), json = std::move(json)](
                      FakeRasConnection& c, bool as_json) { c.Write(as_json ? json : text); };
  return server;
}

// A server that answers the protocol and then sends `chunk` until the client goes, `pause`
// between chunks.
NcclLikeServer Endless(std::string chunk, std::chrono::milliseconds pause) {
  NcclLikeServer server;
  server.report = [chunk = std::move(chunk), pause](FakeRasConnection& c, bool) {
    while (c.Write(chunk)) std::this_thread::sleep_for(pause);
  };
  return server;
}

// The call, timed; the time is only checked against a generous bound.
struct TimedAnswers {
  std::vector<RasAnswer> answers;
  std::chrono::milliseconds took{};
};
TimedAnswers Ask(const std::vector<RasQuery>& queries, std::chrono::milliseconds deadline,
                 std::size_t max_report_bytes = core::kMaxRasReportBytes) {
  const auto start = RasTestClock::now();
  TimedAnswers timed;
  timed.answers = probes::QueryRas(queries, deadline, max_report_bytes);
  timed.took = std::chrono::duration_cast<std::chrono::milliseconds>(RasTestClock::now() - start);
  EXPECT_EQ(timed.answers.size(), queries.size());
  return timed;
}

TEST(RasClient, AsksForJsonAndGetsTheReport) {
  std::atomic<int> ran_ahead{0};
  NcclLikeServer behaviour = Reporting();
  behaviour.ran_ahead = &ran_ahead;
  FakeRas server(NcclLike(behaviour));
  const auto [answers, took] = Ask({server.Query()}, 5s);
  const RasAnswer& answer = answers.at(0);
  EXPECT_EQ(answer.status, RasAnswerStatus::Answered) << answer.error;
  EXPECT_EQ(answer.report, kJsonReport);
  EXPECT_TRUE(answer.json);
  EXPECT_EQ(answer.server_protocol, 2);
  EXPECT_EQ(answer.error, "");
  EXPECT_LE(answer.took, took);
  EXPECT_EQ(
      server.SessionsWhen(1),
      std::vector<std::string>{"CLIENT PROTOCOL 2\nTIMEOUT 5\nSET FORMAT json\nVERBOSE STATUS\n"});
  EXPECT_EQ(ran_ahead, 0) << "each command waits for the last one's answer, as ncclras does";
}

TEST(RasClient, AsksInTextWhenToldTo) {
  FakeRas server(NcclLike(Reporting()));
  RasQuery query = server.Query();
  query.json = false;
  query.verbose = false;
  query.server_timeout_s = 30;
  RasQuery bare = query;
  bare.server_timeout_s = -1;  // the server's own timeout: no TIMEOUT command
  const auto [answers, took] = Ask({query}, 5s);
  EXPECT_EQ(answers.at(0).status, RasAnswerStatus::Answered) << answers.at(0).error;
  EXPECT_EQ(answers.at(0).report, kTextReport);
  EXPECT_FALSE(answers.at(0).json);
  const auto bare_answers = probes::QueryRas({bare}, 5s);
  EXPECT_EQ(bare_answers.at(0).status, RasAnswerStatus::Answered) << bare_answers.at(0).error;
  EXPECT_EQ(server.SessionsWhen(2),
            (std::vector<std::string>{"CLIENT PROTOCOL 2\nTIMEOUT 30\nSTATUS\n",
                                      "CLIENT PROTOCOL 2\nSTATUS\n"}));
}

// NCCL before 2.28.7 answers SET FORMAT with "ERROR: Unknown command ..." and keeps the
// connection (client_support.cc, v2.24.3-1 to v2.28.3-1): the report then comes as text on it.
TEST(RasClient, AnOldServerRefusesJsonAndAnswersInTextOnTheSameConnection) {
  NcclLikeServer old = Reporting();
  old.knows_json = false;
  FakeRas server(NcclLike(old));
  const auto [answers, took] = Ask({server.Query()}, 5s);
  EXPECT_EQ(answers.at(0).status, RasAnswerStatus::Answered) << answers.at(0).error;
  EXPECT_FALSE(answers.at(0).json);
  EXPECT_EQ(answers.at(0).report, kTextReport);
  EXPECT_EQ(
      server.SessionsWhen(1),
      std::vector<std::string>{"CLIENT PROTOCOL 2\nTIMEOUT 5\nSET FORMAT json\nVERBOSE STATUS\n"});
}

TEST(RasClient, AServerThatHangsUpOnSetFormatIsAskedOnceMoreInText) {
  NcclLikeServer rude = Reporting();
  rude.knows_json = false;
  rude.closes_after_error = true;
  FakeRas server(NcclLike(rude));
  const auto [answers, took] = Ask({server.Query()}, 5s);
  EXPECT_EQ(answers.at(0).status, RasAnswerStatus::Answered) << answers.at(0).error;
  EXPECT_FALSE(answers.at(0).json);
  EXPECT_EQ(answers.at(0).report, kTextReport);
  EXPECT_EQ(server.SessionsWhen(2),
            (std::vector<std::string>{"CLIENT PROTOCOL 2\nTIMEOUT 5\nSET FORMAT json\n",
                                      "CLIENT PROTOCOL 2\nTIMEOUT 5\nVERBOSE STATUS\n"}));
}

TEST(RasClient, AnotherProtocolNumberIsSpokenToAllTheSameAndAnErrorIsQuoted) {
  NcclLikeServer newer = Reporting();
  newer.protocol = "3";
  FakeRas newer_server(NcclLike(newer));
  NcclLikeServer strict = Reporting();
  strict.timeout_answer = "ERROR: Invalid timeout value 5";
  FakeRas strict_server(NcclLike(strict));
  const auto [answers, took] = Ask({newer_server.Query(), strict_server.Query()}, 5s);
  EXPECT_EQ(answers.at(0).status, RasAnswerStatus::Answered) << answers.at(0).error;
  EXPECT_EQ(answers.at(0).server_protocol, 3);
  EXPECT_EQ(answers.at(1).status, RasAnswerStatus::ProtocolError);
  EXPECT_EQ(answers.at(1).error, "TIMEOUT 5: server said: \"ERROR: Invalid timeout value 5\"");
  EXPECT_EQ(answers.at(1).server_protocol, 2);
}

TEST(RasClient, NothingListeningIsRefused) {
  RasQuery query;
  query.port = static_cast<std::uint16_t>(FreeLoopbackPort());
  const auto [answers, took] = Ask({query}, 5s);
  EXPECT_EQ(answers.at(0).status, RasAnswerStatus::Refused) << answers.at(0).error;
  EXPECT_EQ(answers.at(0).error,
            "nothing listens on 127.0.0.1:" + std::to_string(query.port) + " (connection refused)");
  EXPECT_LT(took, 4s) << "a refusal is not waited out";
}

// Fifty servers that accept and never answer cost one deadline together, not fifty.
TEST(RasClient, SilentServersTimeOutTogetherAtTheDeadline) {
  std::vector<std::unique_ptr<FakeRas>> servers;
  std::vector<RasQuery> queries;
  for (int i = 0; i < 50; ++i) {
    servers.push_back(std::make_unique<FakeRas>([](FakeRasConnection& c) {
      while (c.ReadLine()) {
      }
    }));
    queries.push_back(servers.back()->Query());
  }
  const auto [answers, took] = Ask(queries, 1s);
  for (const RasAnswer& answer : answers) {
    EXPECT_EQ(answer.status, RasAnswerStatus::TimedOut);
    EXPECT_EQ(answer.error.rfind("no answer to CLIENT PROTOCOL 2 from 127.0.0.1:", 0), 0u)
        << answer.error;
    EXPECT_GE(answer.took, 1s);
  }
  EXPECT_GE(took, 1s);
  EXPECT_LT(took, 3s);
  for (const auto& server : servers) server->Stop();
}

TEST(RasClient, AnEndlessReportIsCutAtTheLimitInBoundedMemory) {
  FakeRas server(NcclLike(Endless(std::string(64 * 1024, 'x'), 0ms)));
  constexpr std::size_t kLimit = 300 * 1000;  // not a multiple of the reads
  const auto [answers, took] = Ask({server.Query(), server.Query()}, 10s, kLimit);
  for (const RasAnswer& answer : answers) {
    EXPECT_EQ(answer.status, RasAnswerStatus::TooLarge) << answer.error;
    EXPECT_EQ(answer.report.size(), kLimit);
    EXPECT_LE(answer.report.capacity(), kLimit);
    EXPECT_EQ(answer.report.find_first_not_of('x'), std::string::npos);
  }
  EXPECT_LT(took, 10s);
  const auto [whole, took_whole] = Ask({server.Query()}, 20s);
  EXPECT_EQ(whole.at(0).status, RasAnswerStatus::TooLarge) << whole.at(0).error;
  EXPECT_EQ(whole.at(0).report.size(), core::kMaxRasReportBytes);
  EXPECT_LE(whole.at(0).report.capacity(), core::kMaxRasReportBytes);
}

TEST(RasClient, AnEndlessProtocolLineIsAProtocolError) {
  FakeRas server([](FakeRasConnection& c) {
    c.ReadLine();
    c.Write("SERVER PROTOCOL ");
    while (c.Write(std::string(1000, '2'))) {
    }
  });
  const auto [answers, took] = Ask({server.Query()}, 5s);
  EXPECT_EQ(answers.at(0).status, RasAnswerStatus::ProtocolError);
  EXPECT_EQ(answers.at(0).error.rfind("an answer longer than 4096 bytes from 127.0.0.1:", 0), 0u)
      << answers.at(0).error;
  EXPECT_LT(answers.at(0).error.size(), 300u);
  EXPECT_LT(took, 5s);
}

TEST(RasClient, SomethingElseOnThePortIsAProtocolError) {
  std::string garbage;
  for (int i = 0; i < 512; ++i) garbage += static_cast<char>((i * 37) % 256);
  garbage += "\n";
  FakeRas binary([garbage](FakeRasConnection& c) {
    c.Write(garbage);
    c.ReadLine();
  });
  FakeRas http([](FakeRasConnection& c) {
    c.ReadLine();
    c.Write("HTTP/1.1 400 Bad Request\r\n\r\n");
  });
  const auto [answers, took] = Ask({binary.Query(), http.Query()}, 5s);
  for (const RasAnswer& answer : answers) {
    EXPECT_EQ(answer.status, RasAnswerStatus::ProtocolError) << answer.error;
    EXPECT_NE(answer.error.find("is not NCCL's RAS service"), std::string::npos) << answer.error;
    EXPECT_LT(answer.error.size(), 300u);
    for (const char c : answer.error) EXPECT_TRUE(c >= ' ' && c <= '~') << answer.error;
  }
  EXPECT_NE(answers.at(1).error.find("\"HTTP/1.1 400 Bad Request\""), std::string::npos);
}

TEST(RasClient, ASlowServerTimesOutAtTheDeadlineWithWhatCame) {
  FakeRas server(NcclLike(Endless("x", 100ms)));
  const auto [answers, took] = Ask({server.Query()}, 1s);
  const RasAnswer& answer = answers.at(0);
  EXPECT_EQ(answer.status, RasAnswerStatus::TimedOut);
  EXPECT_FALSE(answer.report.empty());
  EXPECT_LE(answer.report.size(), 20u);
  EXPECT_EQ(answer.error.rfind("the report from 127.0.0.1:", 0), 0u) << answer.error;
  EXPECT_GE(took, 1s);
  EXPECT_LT(took, 3s);
}

// Before the report, a closed connection is a failed exchange; in the report it is the report's
// end (RAS closes after it), and a report cut short is handed over for the reader to mark.
TEST(RasClient, AServerThatClosesEarlyIsAProtocolErrorUnlessTheReportHadBegun) {
  FakeRas mute([](FakeRasConnection& c) { c.ReadLine(); });
  // Reads the TIMEOUT line before it closes: a close with the line unread would be a reset.
  FakeRas halfway([](FakeRasConnection& c) {
    c.ReadLine();
    c.Write("SERVER PROTOCOL 2\n");
    c.ReadLine();
  });
  NcclLikeServer empty_report = Reporting("", "");
  FakeRas empty(NcclLike(empty_report));
  NcclLikeServer cut = Reporting("", std::string(kJsonReport.substr(0, 20)));
  FakeRas cut_server(NcclLike(cut));
  const auto [answers, took] =
      Ask({mute.Query(), halfway.Query(), empty.Query(), cut_server.Query()}, 5s);
  EXPECT_EQ(answers.at(0).status, RasAnswerStatus::ProtocolError);
  EXPECT_EQ(answers.at(0).error, "127.0.0.1:" + std::to_string(mute.port()) +
                                     " closed the connection before answering CLIENT PROTOCOL 2");
  EXPECT_EQ(answers.at(1).status, RasAnswerStatus::ProtocolError);
  EXPECT_EQ(answers.at(1).error, "127.0.0.1:" + std::to_string(halfway.port()) +
                                     " closed the connection before answering TIMEOUT 5");
  EXPECT_EQ(answers.at(2).status, RasAnswerStatus::ProtocolError);
  EXPECT_EQ(answers.at(2).error, "127.0.0.1:" + std::to_string(empty.port()) +
                                     " closed the connection without a report");
  EXPECT_EQ(answers.at(3).status, RasAnswerStatus::Answered) << answers.at(3).error;
  EXPECT_EQ(answers.at(3).report, kJsonReport.substr(0, 20));
  EXPECT_TRUE(answers.at(3).json);
}

TEST(RasClient, AHundredServersAreAnsweredAtOnce) {
  std::vector<std::unique_ptr<FakeRas>> servers;
  std::vector<RasQuery> queries;
  for (int i = 0; i < 100; ++i) {
    servers.push_back(std::make_unique<FakeRas>(NcclLike(
        Reporting("", "{\"nccl_version\": \"2.28.9\", \"server\": " + std::to_string(i) + "}"))));
    queries.push_back(servers.back()->Query());
  }
  const auto [answers, took] = Ask(queries, 20s);
  for (std::size_t i = 0; i < answers.size(); ++i) {
    EXPECT_EQ(answers[i].status, RasAnswerStatus::Answered) << answers[i].error;
    EXPECT_EQ(answers[i].report,
              "{\"nccl_version\": \"2.28.9\", \"server\": " + std::to_string(i) + "}");
  }
  EXPECT_LT(took, 20s);
  for (const auto& server : servers) server->Stop();
}

// One call with every kind of server: the hostile ones hold no one back, and each answer says
// what its server did.
TEST(RasClient, HostileServersDoNotHoldTheOthersBack) {
  FakeRas good(NcclLike(Reporting()));
  FakeRas silent([](FakeRasConnection& c) {
    while (c.ReadLine()) {
    }
  });
  FakeRas endless(NcclLike(Endless(std::string(64 * 1024, 'x'), 0ms)));
  FakeRas slow(NcclLike(Endless("x", 100ms)));
  RasQuery refused;
  refused.port = static_cast<std::uint16_t>(FreeLoopbackPort());
  const auto [answers, took] =
      Ask({silent.Query(), endless.Query(), refused, slow.Query(), good.Query()}, 2s, 1 << 20);
  EXPECT_EQ(answers.at(0).status, RasAnswerStatus::TimedOut);
  EXPECT_EQ(answers.at(1).status, RasAnswerStatus::TooLarge);
  EXPECT_EQ(answers.at(2).status, RasAnswerStatus::Refused);
  EXPECT_EQ(answers.at(3).status, RasAnswerStatus::TimedOut);
  EXPECT_EQ(answers.at(4).status, RasAnswerStatus::Answered) << answers.at(4).error;
  EXPECT_EQ(answers.at(4).report, kJsonReport);
  EXPECT_LT(answers.at(4).took, 2s);
  EXPECT_LT(took, 6s);
}

TEST(RasClient, HostsAreNumericAddressesOrLocalhost) {
  FakeRas server(NcclLike(Reporting()));
  RasQuery localhost = server.Query();
  localhost.host = "localhost";  // 127.0.0.1 and ::1 are both tried
  RasQuery name = server.Query();
  name.host = "ras.example.com";
  RasQuery no_port = server.Query();
  no_port.port = 0;
  const auto [answers, took] = Ask({localhost, name, no_port}, 5s);
  EXPECT_EQ(answers.at(0).status, RasAnswerStatus::Answered) << answers.at(0).error;
  EXPECT_EQ(answers.at(0).report, kJsonReport);
  EXPECT_EQ(answers.at(1).status, RasAnswerStatus::SocketError);
  EXPECT_EQ(answers.at(1).error.rfind("\"ras.example.com:", 0), 0u) << answers.at(1).error;
  EXPECT_EQ(answers.at(2).status, RasAnswerStatus::SocketError);
}

TEST(RasClient, ANamespaceThatCannotBeEnteredIsANamespaceError) {
  FakeRas server(NcclLike(Reporting()));
  RasQuery elsewhere = server.Query();
  elsewhere.netns = "/nonexistent/proc/1/ns/net";
  const auto [answers, took] = Ask({elsewhere, server.Query()}, 5s);
  EXPECT_EQ(answers.at(0).status, RasAnswerStatus::NamespaceError);
  EXPECT_NE(answers.at(0).error.find("/nonexistent/proc/1/ns/net"), std::string::npos)
      << answers.at(0).error;
  EXPECT_EQ(answers.at(1).status, RasAnswerStatus::Answered) << answers.at(1).error;
}

TEST(RasClient, StatusesHaveNames) {
  EXPECT_EQ(probes::RasAnswerStatusName(RasAnswerStatus::Answered), "Answered");
  EXPECT_EQ(probes::RasAnswerStatusName(RasAnswerStatus::Refused), "Refused");
  EXPECT_EQ(probes::RasAnswerStatusName(RasAnswerStatus::TimedOut), "TimedOut");
  EXPECT_EQ(probes::RasAnswerStatusName(RasAnswerStatus::ProtocolError), "ProtocolError");
  EXPECT_EQ(probes::RasAnswerStatusName(RasAnswerStatus::TooLarge), "TooLarge");
  EXPECT_EQ(probes::RasAnswerStatusName(RasAnswerStatus::NamespaceError), "NamespaceError");
  EXPECT_EQ(probes::RasAnswerStatusName(RasAnswerStatus::SocketError), "SocketError");
}

}  // namespace
}  // namespace ncclguard::test
