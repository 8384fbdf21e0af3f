// A free TCP port on 127.0.0.1, for tests that start a server of their own. Header-only so that
// unit and integration test binaries share it without sharing a library.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>

namespace ncclguard::test {

// A loopback port nothing listens on right now (another process may take it before the caller
// binds: callers that can, retry).
inline int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    throw std::runtime_error("bind to a free loopback port failed");
  }
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

// A socket listening on 127.0.0.1 on a port the kernel picks, and that port.
struct LoopbackListener {
  int fd = -1;
  std::uint16_t port = 0;
};
inline LoopbackListener ListenOnLoopback(int backlog) {
  LoopbackListener listener;
  listener.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (listener.fd < 0 ||
      ::bind(listener.fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listener.fd, backlog) != 0 ||
      ::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (listener.fd >= 0) ::close(listener.fd);
    throw std::runtime_error("listening on a free loopback port failed");
  }
  listener.port = ntohs(address.sin_port);
  return listener;
}

}  // namespace ncclguard::test
