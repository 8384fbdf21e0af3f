// The controller's plain-HTTP probes when it serves no webhook: /healthz always, /readyz only
// once the caches synced.
#include "cli/health_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <stdexcept>
#include <string>

#include "loopback_port.h"

namespace ncclguard::cli {
namespace {

// The status line of a GET over a fresh connection ("" when nothing answered).
std::string StatusLine(int port, const std::string& method, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return "";
  }
  const std::string request =
      method + " " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  if (::send(fd, request.data(), request.size(), 0) < 0) {
    ::close(fd);
    return "";
  }
  std::string response;
  char buffer[512];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) {
    response.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return response.substr(0, response.find("\r\n"));
}

TEST(HealthServer, ReadyOnlyOnceTheCachesSynced) {
  std::atomic<bool> synced{false};
  const int port = test::FreeLoopbackPort();
  HealthServer server("127.0.0.1:" + std::to_string(port), [&synced] { return synced.load(); });
  server.Start();
  EXPECT_EQ(StatusLine(port, "GET", "/healthz"), "HTTP/1.1 200 OK");
  EXPECT_EQ(StatusLine(port, "GET", "/readyz"), "HTTP/1.1 503 Service Unavailable");
  synced = true;
  EXPECT_EQ(StatusLine(port, "GET", "/readyz"), "HTTP/1.1 200 OK");
  EXPECT_EQ(StatusLine(port, "GET", "/metrics"), "HTTP/1.1 200 OK");
  EXPECT_EQ(StatusLine(port, "GET", "/other"), "HTTP/1.1 404 Not Found");
  EXPECT_EQ(StatusLine(port, "POST", "/readyz"), "HTTP/1.1 405 Method Not Allowed");
  server.Shutdown();
  EXPECT_EQ(StatusLine(port, "GET", "/healthz"), "");
}

TEST(HealthServer, BadAddressesAreRefusedAndZeroDisables) {
  EXPECT_TRUE(HealthListenDisabled("0"));
  EXPECT_TRUE(HealthListenDisabled(""));
  EXPECT_FALSE(HealthListenDisabled(":8081"));
  HealthServer no_port("127.0.0.1", [] { return true; });
  EXPECT_THROW(no_port.Start(), std::runtime_error);
  HealthServer garbage("not a host:port", [] { return true; });
  EXPECT_THROW(garbage.Start(), std::runtime_error);
}

}  // namespace
}  // namespace ncclguard::cli
