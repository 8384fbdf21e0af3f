// `ncclguard peer serve | test` on 127.0.0.1: exit codes, what each output says, usage errors.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <thread>

#include "core/json.h"
#include "tests/unit/test_support.h"

namespace ncclguard::test {
namespace {

// A port free on 127.0.0.1 a moment ago.
std::uint16_t FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

// Whether something accepts a TCP connection on 127.0.0.1:port.
bool Listening(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool connected = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return connected;
}

TEST(PeerCli, ServeOnOneSideTestFromTheOtherPassesAndAnUnservedPortFails) {
  const std::string served = std::to_string(FreePort());
  std::string unserved = std::to_string(FreePort());
  while (unserved == served) unserved = std::to_string(FreePort());
  CommandResult serve;
  std::thread server([&] {
    serve =
        RunCli({"peer", "serve", "--address", "127.0.0.1", "--ports", served, "--duration", "6s"});
  });
  // Until it listens (a bare connection is dropped by the server and counted apart).
  for (int tries = 0; tries < 80 && !Listening(std::stoi(served)); ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const auto ok = RunCli({"peer", "test", "127.0.0.1", "--ports", served});
  const auto failed = RunCli({"peer", "test", "127.0.0.1", "--ports", served + "," + unserved, "-o",
                              "json", "--timeout", "1s"});
  server.join();

  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("1 of 1 port(s) of 127.0.0.1 passed"), std::string::npos) << ok.out;

  EXPECT_EQ(failed.exit_code, 1) << failed.out << failed.err;
  const core::Json results = core::Json::parse(failed.out);
  ASSERT_EQ(results.size(), 2u) << failed.out;
  std::map<std::string, core::Json> by_port;  // results come in port order
  for (const core::Json& r : results) by_port[std::to_string(r["port"].get<int>())] = r;
  EXPECT_EQ(by_port[served]["result"], "passed");
  EXPECT_FALSE(by_port[served].contains("guide"));
  EXPECT_EQ(by_port[unserved]["result"], "refused");
  EXPECT_NE(by_port[unserved]["guide"].get<std::string>().find("#host-firewall"),
            std::string::npos);

  EXPECT_EQ(serve.exit_code, 0) << serve.err;
  EXPECT_NE(serve.out.find("served 1 of 1 port(s); answered 2 test(s)"), std::string::npos)
      << serve.out;
}

TEST(PeerCli, ATextReportSaysWhatAFailedPortMeans) {
  const auto r = RunCli({"peer", "test", "127.0.0.1", "--ports", std::to_string(FreePort()),
                         "--guide-base-url", "https://wiki.example/g"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("refused: nothing serves it there, or a REJECT rule \u2014 see "
                       "https://wiki.example/g#host-firewall"),
            std::string::npos)
      << r.out;
}

TEST(PeerCli, UsageAndInputErrorsExitTwo) {
  EXPECT_EQ(RunCli({"peer"}).exit_code, 2);
  EXPECT_EQ(RunCli({"peer", "test", "127.0.0.1"}).exit_code, 2) << "no ports";
  EXPECT_EQ(RunCli({"peer", "test", "127.0.0.1", "--ports", "1-65535"}).exit_code, 2);
  EXPECT_EQ(RunCli({"peer", "test", "node-a", "--ports", "29500"}).exit_code, 2);
  EXPECT_EQ(RunCli({"peer", "test", "127.0.0.1", "--ports", "29500", "--timeout", "x"}).exit_code,
            2);
  EXPECT_EQ(RunCli({"peer", "serve", "--ports", "29500", "--duration", "-1s"}).exit_code, 2);
  EXPECT_EQ(RunCli({"peer", "serve", "--address", "localhost", "--ports", "29500"}).exit_code, 2);
}

}  // namespace
}  // namespace ncclguard::test
