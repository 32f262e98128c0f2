#include "net/tcp_probe.hpp"

#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fcntl.h>

namespace kvactor {

namespace {

struct fd_closer {
  int fd;
  ~fd_closer() {
    if (fd >= 0) ::close(fd);
  }
};

// One address: a non-blocking connect, then poll until it completes or the deadline passes. The
// connected socket is blocking again; the error is the reason.
expected<int> try_connect(const addrinfo& a, std::chrono::milliseconds timeout) {
  fd_closer s{::socket(a.ai_family, a.ai_socktype | SOCK_CLOEXEC, a.ai_protocol)};
  if (s.fd < 0) return make_error(errc::io_error, std::strerror(errno));
  const int flags = ::fcntl(s.fd, F_GETFL);
  ::fcntl(s.fd, F_SETFL, flags | O_NONBLOCK);
  if (::connect(s.fd, a.ai_addr, a.ai_addrlen) != 0) {
    if (errno != EINPROGRESS) return make_error(errc::io_error, std::strerror(errno));
    pollfd p{s.fd, POLLOUT, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (ready == 0)
      return make_error(
          errc::io_error,
          fmt::format("no answer within {:.1f} s", std::chrono::duration<double>(timeout).count()));
    if (ready < 0) return make_error(errc::io_error, std::strerror(errno));
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return make_error(errc::io_error, std::strerror(err));
  }
  ::fcntl(s.fd, F_SETFL, flags);
  return std::exchange(s.fd, -1);
}

} // namespace

expected<tcp_addresses> resolve_tcp(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* found = nullptr;
  const auto service = std::to_string(port);
  if (int rc = ::getaddrinfo(passive && host.empty() ? nullptr : host.c_str(), service.c_str(),
                             &hints, &found);
      rc != 0)
    return make_error(errc::io_error,
                      fmt::format("{}:{}: cannot resolve: {}", host, port, ::gai_strerror(rc)));
  return tcp_addresses{found, ::freeaddrinfo};
}

expected<int> tcp_connect(const std::string& host, uint16_t port,
                          std::chrono::milliseconds timeout) {
  auto list = resolve_tcp(host, port, false);
  if (!list) return list.err();
  std::string why = "no address";
  for (const addrinfo* a = list->get(); a != nullptr; a = a->ai_next) {
    auto fd = try_connect(*a, timeout);
    if (fd) return *fd;
    why = fd.err().message;
  }
  return make_error(errc::io_error, fmt::format("{}:{}: {}", host, port, why));
}

status tcp_probe(const std::string& host, uint16_t port, std::chrono::milliseconds timeout) {
  auto fd = tcp_connect(host, port, timeout);
  if (!fd) return fd.err();
  ::close(*fd);
  return ok();
}

} // namespace kvactor
