// The TCP tier of the peer checks (probes/peer_tcp.h) on 127.0.0.1: a served port passes, an
// unserved one is refused, a full accept queue drops the SYN as a firewall's DROP does (timed
// out), something else on the port is a wrong answer; the server stays bounded against clients
// that send too much, too little or nothing.
#include "probes/peer_tcp.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>
#include <thread>

#include "core/errors.h"
#include "loopback_port.h"

namespace ncclguard::test {
namespace {

using namespace std::chrono_literals;
using probes::PortOutcome;

// A listening socket on 127.0.0.1 with the given backlog, never accepted from.
struct Listener {
  int fd = -1;
  std::uint16_t port = 0;
  explicit Listener(int backlog) {
    const LoopbackListener listener = ListenOnLoopback(backlog);
    fd = listener.fd;
    port = listener.port;
  }
  ~Listener() { ::close(fd); }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
};

// `n` ports free on 127.0.0.1 a moment ago (bound at once, then released).
std::vector<std::uint16_t> FreePorts(std::size_t n) {
  std::vector<std::unique_ptr<Listener>> held;
  std::vector<std::uint16_t> ports;
  for (std::size_t i = 0; i < n; ++i) {
    held.push_back(std::make_unique<Listener>(1));
    ports.push_back(held.back()->port);
  }
  std::sort(ports.begin(), ports.end());
  return ports;
}

// Serves `ports` on 127.0.0.1 in a thread until Stop.
class Server {
 public:
  explicit Server(probes::PeerServeOptions options) {
    options.address = "127.0.0.1";
    thread_ = std::thread([this, options] { summary_ = probes::ServePeerPorts(options, &stop_); });
    std::this_thread::sleep_for(100ms);  // bound and listening; a test that races gets refused
  }
  ~Server() { Stop(); }
  const probes::PeerServeSummary& Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return summary_;
  }

 private:
  std::atomic<bool> stop_{false};
  probes::PeerServeSummary summary_;
  std::thread thread_;
};

probes::PeerServeOptions Serving(std::vector<std::uint16_t> ports) {
  probes::PeerServeOptions options;
  options.ports = std::move(ports);
  options.duration = 30s;
  return options;
}

TEST(PeerTcp, ServedPortsPassAndAnUnservedOneIsRefused) {
  const auto ports = FreePorts(4);
  Server server(Serving({ports[0], ports[1], ports[2]}));
  const auto results = probes::TestPeerPorts("127.0.0.1", ports, 2s);
  ASSERT_EQ(results.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(results[i].port, ports[i]);
    EXPECT_EQ(results[i].outcome, PortOutcome::kPassed) << results[i].detail;
  }
  EXPECT_EQ(results[3].outcome, PortOutcome::kRefused);
  EXPECT_EQ(results[3].detail, "Connection refused");
  const auto& summary = server.Stop();
  EXPECT_EQ(summary.served.size(), 3u);
  EXPECT_EQ(summary.answered, 3u);
  EXPECT_EQ(summary.dropped, 0u);
}

// Linux drops a SYN when the listener's accept queue is full, as a firewall's DROP rule does:
// the client sees no answer at all.
TEST(PeerTcp, ASynNobodyAnswersTimesOut) {
  Listener full(0);
  // Fill the accept queue (backlog 0 holds one connection).
  const auto filler = probes::TestPeerPorts("127.0.0.1", {full.port}, 300ms);
  const auto results = probes::TestPeerPorts("127.0.0.1", {full.port}, 500ms);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, PortOutcome::kTimedOut) << results[0].detail;
}

TEST(PeerTcp, AListenerThatNeverEchoesIsAWrongAnswer) {
  Listener silent(8);
  const auto results = probes::TestPeerPorts("127.0.0.1", {silent.port}, 300ms);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, PortOutcome::kWrongAnswer);
  EXPECT_EQ(results[0].detail, "connected, no echo within the timeout");
}

TEST(PeerTcp, TheServerBindsWhatItCanAndSaysWhatItCannot) {
  Listener taken(1);  // a port in use (a training process's, say) is left to it
  const auto free = FreePorts(1);
  Server server(Serving({taken.port, free[0]}));
  const auto& summary = server.Stop();
  EXPECT_EQ(summary.served, std::vector<std::uint16_t>{free[0]});
  ASSERT_EQ(summary.unserved.size(), 1u);
  EXPECT_EQ(summary.unserved[0], std::to_string(taken.port) + ": Address already in use");

  probes::PeerServeOptions none = Serving({taken.port});
  none.address = "127.0.0.1";
  EXPECT_THROW(probes::ServePeerPorts(none), core::InputError);
}

// A client that sends a megabyte, one that sends nothing and holds on, one that speaks another
// protocol: each is dropped after at most a hello's worth of bytes, and an honest test after them
// still passes.
TEST(PeerTcp, HostileClientsAreDroppedAndTheServerKeepsServing) {
  const auto ports = FreePorts(1);
  probes::PeerServeOptions options = Serving(ports);
  options.hello_timeout = 200ms;
  options.max_connections = 2;
  Server server(options);
  const auto connect_and_send = [&](const std::string& bytes) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(ports[0]);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    if (!bytes.empty()) ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    return fd;
  };
  const int flood = connect_and_send(std::string(1 << 20, 'x'));
  const int silent = connect_and_send("");
  const int http = connect_and_send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  std::this_thread::sleep_for(500ms);
  const auto results = probes::TestPeerPorts("127.0.0.1", ports, 2s);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, PortOutcome::kPassed) << results[0].detail;
  for (const int fd : {flood, silent, http}) ::close(fd);
  const auto& summary = server.Stop();
  EXPECT_EQ(summary.answered, 1u);
  EXPECT_EQ(summary.dropped, 3u);
}

TEST(PeerTcp, PortListsAreSortedBoundedAndCheckedBeforeTheyAreExpanded) {
  EXPECT_EQ(probes::ParsePeerPorts("29500,40000-40002,29500"),
            (std::vector<std::uint16_t>{29500, 40000, 40001, 40002}));
  EXPECT_EQ(probes::ParsePeerPorts("65535"), std::vector<std::uint16_t>{65535});
  for (const char* bad : {"", "0", "65536", "a", "1,,2", "5-3", "1-65535", "-1", "1-", "80 ",
                          "99999999999999999999"}) {
    EXPECT_THROW(probes::ParsePeerPorts(bad), core::InputError) << bad;
  }
  std::string many;
  for (int port = 1000; port < 1065; ++port)
    many += (many.empty() ? "" : ",") + std::to_string(port);
  EXPECT_THROW(probes::ParsePeerPorts(many), core::InputError);
  // A megabyte of the same port is one port, read once; a megabyte of digits is one bad port,
  // named in at most a few dozen characters.
  std::string repeated;
  while (repeated.size() < (1 << 20)) repeated += "29500,";
  repeated += "29500";
  EXPECT_EQ(probes::ParsePeerPorts(repeated), std::vector<std::uint16_t>{29500});
  try {
    probes::ParsePeerPorts(std::string(1 << 20, '7'));
    ADD_FAILURE() << "a megabyte of digits was taken for a port";
  } catch (const core::InputError& e) {
    EXPECT_LT(std::string(e.what()).size(), 200u);
  }
  EXPECT_THROW(probes::TestPeerPorts("localhost", {80}, 10ms), core::InputError)
      << "a numeric address only: the probe never resolves names";
}

TEST(PeerTcp, ASampleOfTheEphemeralRangeIsTheSameOnEveryNodeAndSpread) {
  const auto [first, last] = probes::ParsePortRange("32768\t60999\n");
  EXPECT_EQ(first, 32768);
  EXPECT_EQ(last, 60999);
  const auto sample = probes::SamplePorts(first, last, 8, 17);
  ASSERT_EQ(sample.size(), 8u);
  EXPECT_EQ(sample, probes::SamplePorts(first, last, 8, 17));
  EXPECT_NE(sample, probes::SamplePorts(first, last, 8, 18));
  EXPECT_EQ(std::set<std::uint16_t>(sample.begin(), sample.end()).size(), 8u);
  EXPECT_GE(sample.front(), first);
  EXPECT_LE(sample.back(), last);
  EXPECT_GT(sample.back() - sample.front(), (last - first) / 2) << "spread over the range";
  EXPECT_EQ(probes::SamplePorts(100, 102, 8, 0), (std::vector<std::uint16_t>{100, 101, 102}));
  for (const char* bad : {"", "32768", "60999 32768", "1 2 3", "x y"}) {
    EXPECT_THROW(probes::ParsePortRange(bad), core::InputError) << bad;
  }
}

}  // namespace
}  // namespace ncclguard::test
