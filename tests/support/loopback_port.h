#pragma once
// Loopback TCP ports for the data-parallel tests: one held busy, or one free right now.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace testsupport {

/// A TCP socket bound to 127.0.0.1 on a port the kernel picked (`port`); closed on destruction.
struct BoundSocket {
  int fd = -1;
  int port = 0;
  BoundSocket() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~BoundSocket() { ::close(fd); }
  BoundSocket(const BoundSocket&) = delete;
  BoundSocket& operator=(const BoundSocket&) = delete;
};

/// A loopback port that nobody listens on now.
inline int unused_port() { return BoundSocket().port; }

}  // namespace testsupport
