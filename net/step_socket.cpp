#include "net/step_socket.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/peer_auth.hpp"
#include "net/tcp_probe.hpp"

namespace kvactor {

namespace {

error io_failure(const std::string& what) {
  return make_error(errc::io_error, what + ": " + std::strerror(errno));
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

} // namespace

bool spin_until_readable(pollfd* fds, size_t n, std::chrono::microseconds spin) {
  if (spin.count() <= 0) return false;
  const auto until = std::chrono::steady_clock::now() + spin;
  do {
    if (::poll(fds, n, 0) > 0) return true;
  } while (std::chrono::steady_clock::now() < until);
  return false;
}

step_socket::step_socket(int fd) : fd_(fd) {
  set_nodelay(fd_); // a step is one small frame each way: never wait to fill a segment
}

step_socket::~step_socket() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (fd_ >= 0) ::close(fd_);
}

namespace {

// Waits until `fd` is ready for what OpenSSL wants; false when `timeout` passed first.
bool wait_for_tls(int fd, int ssl_error, std::optional<std::chrono::milliseconds> timeout) {
  pollfd p{fd, static_cast<short>(ssl_error == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN), 0};
  int ready = 0;
  do
    ready = ::poll(&p, 1, timeout ? static_cast<int>(timeout->count()) : -1);
  while (ready < 0 && errno == EINTR);
  return ready != 0;
}

bool wants_io(int ssl_error) {
  return ssl_error == SSL_ERROR_WANT_READ || ssl_error == SSL_ERROR_WANT_WRITE;
}

error tls_failure(const char* what, int ssl_error) {
  auto why = last_tls_error();
  if (why.empty())
    why = ssl_error == SSL_ERROR_SYSCALL && errno != 0 ? std::strerror(errno)
                                                       : fmt::format("error {}", ssl_error);
  return make_error(errc::io_error, fmt::format("TLS {}: {}", what, why));
}

// OpenSSL writes with write(), not send(MSG_NOSIGNAL): a peer that is gone would raise SIGPIPE,
// whose default action ends the process without a word (a node whose driver exited while an
// answer was on its way died so). Write errors are handled where they occur instead.
void ignore_sigpipe() {
  static std::once_flag once;
  std::call_once(once, [] { std::signal(SIGPIPE, SIG_IGN); });
}

} // namespace

status step_socket::start_tls(const step_tls& tls, connection_side side,
                              std::chrono::milliseconds timeout) {
  ignore_sigpipe();
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
  ssl_ = SSL_new(tls.context());
  if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) return tls_failure("session", 0);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    ERR_clear_error();
    const int r = side == connection_side::accepted ? SSL_accept(ssl_) : SSL_connect(ssl_);
    if (r == 1) return ok();
    const int e = SSL_get_error(ssl_, r);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!wants_io(e)) return tls_failure("handshake", e);
    if (left.count() <= 0 || !wait_for_tls(fd_, e, left))
      return make_error(errc::io_error,
                        fmt::format("TLS handshake: not done within {} ms", timeout.count()));
  }
}

bool step_socket::has_buffered() {
  if (ssl_ == nullptr) return false;
  std::lock_guard<std::mutex> lock(ssl_mu_);
  return SSL_pending(ssl_) > 0;
}

status step_socket::write_tls(const char* data, size_t n) {
  std::lock_guard<std::mutex> lock(ssl_mu_);
  while (n > 0) {
    ERR_clear_error();
    const int r = SSL_write(ssl_, data, static_cast<int>(std::min<size_t>(n, 1 << 30)));
    if (r > 0) {
      data += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    const int e = SSL_get_error(ssl_, r);
    if (!wants_io(e) || !wait_for_tls(fd_, e, std::chrono::seconds(30)))
      return tls_failure("write", e);
  }
  return ok();
}

expected<size_t> step_socket::read_tls(char* buf, size_t n,
                                       std::optional<std::chrono::milliseconds> timeout) {
  for (;;) {
    int e = 0;
    {
      std::lock_guard<std::mutex> lock(ssl_mu_);
      ERR_clear_error();
      const int r = SSL_read(ssl_, buf, static_cast<int>(std::min<size_t>(n, 1 << 30)));
      if (r > 0) return static_cast<size_t>(r);
      e = SSL_get_error(ssl_, r);
    }
    if (e == SSL_ERROR_ZERO_RETURN) return size_t{0};
    if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) return size_t{0}; // closed, no notify
    if (!wants_io(e)) return tls_failure("read", e);
    if (!wait_for_tls(fd_, e, timeout))
      return make_error(errc::io_error,
                        fmt::format("nothing arrived within {} ms", timeout->count()));
  }
}

status step_socket::write_all(const char* data, size_t n) {
  if (ssl_ != nullptr) return write_tls(data, n);
  while (n > 0) {
    const auto sent = ::send(fd_, data, n, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return io_failure("send");
    data += sent;
    n -= static_cast<size_t>(sent);
  }
  return ok();
}

expected<size_t> step_socket::read_some(char* buf, size_t n,
                                        std::optional<std::chrono::milliseconds> timeout) {
  if (ssl_ != nullptr) return read_tls(buf, n, timeout);
  if (timeout) {
    pollfd p{fd_, POLLIN, 0};
    int ready = 0;
    do
      ready = ::poll(&p, 1, static_cast<int>(timeout->count()));
    while (ready < 0 && errno == EINTR);
    if (ready == 0)
      return make_error(errc::io_error,
                        fmt::format("nothing arrived within {} ms", timeout->count()));
    if (ready < 0) return io_failure("poll");
  }
  for (;;) {
    const auto got = ::recv(fd_, buf, n, 0);
    if (got >= 0) return static_cast<size_t>(got);
    if (errno == EINTR) continue;
    if (errno == ECONNRESET) return size_t{0};
    return io_failure("recv");
  }
}

void step_socket::shut_down() {
  ::shutdown(fd_, SHUT_RDWR);
}

expected<step_listener> listen_tcp(const std::string& host, uint16_t port) {
  auto list = resolve_tcp(host, port, true);
  if (!list) return list.err();
  const addrinfo& a = *list->get();
  const int fd = ::socket(a.ai_family, a.ai_socktype | SOCK_CLOEXEC, a.ai_protocol);
  if (fd < 0) return io_failure("socket");
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, a.ai_addr, a.ai_addrlen) != 0 || ::listen(fd, 16) != 0) {
    auto e = io_failure(fmt::format("{}:{}", host, port));
    ::close(fd);
    return e;
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const auto p = bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&bound)->sin_port;
  return step_listener{fd, ntohs(p)};
}

status prove_cookie(step_socket& s, connection_side side, const std::string& cookie,
                    std::chrono::milliseconds timeout) {
  peer_auth auth{side, cookie, peer_auth::random_nonce()};
  std::vector<char> in;
  while (!auth.done()) {
    auto out = auth.take_output();
    if (auto sent = s.write_all(reinterpret_cast<const char*>(out.data()), out.size()); !sent)
      return sent;
    if (auth.wanted() == 0) break;
    in.resize(auth.wanted());
    auto got = s.read_some(in.data(), in.size(), timeout);
    if (!got) return got.err();
    if (*got == 0)
      return make_error(errc::io_error, "the peer closed the connection during the cookie proof");
    if (auto fed = auth.feed(reinterpret_cast<const std::byte*>(in.data()), *got); !fed) return fed;
  }
  auto last = auth.take_output(); // the accepting side's proof, owed after the client's
  if (auto sent = s.write_all(reinterpret_cast<const char*>(last.data()), last.size()); !sent)
    return sent;
  if (!auth.done())
    return make_error(errc::io_error, "the cookie proof ended before the peer proved itself");
  return ok();
}

status authenticate(step_socket& s, connection_side side, const step_channel_auth& auth,
                    std::chrono::milliseconds timeout) {
  if (auth.tls) return s.start_tls(*auth.tls, side, timeout);
  return prove_cookie(s, side, auth.cookie, timeout);
}

} // namespace kvactor
