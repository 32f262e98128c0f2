// The sockets of the step channel (step_channel_server.hpp, step_channel_client.hpp): TCP with
// TCP_NODELAY, reads bounded by a deadline where the peer has yet to prove itself, and before any
// frame either the cookie proof (peer_auth, loopback) or a mutual TLS handshake (step_tls). A step
// is one small write and one small read each way, so the threads that own these sockets block in
// the kernel and wake only when bytes arrive. Under TLS one thread may write while another reads:
// OpenSSL's session is then used under a lock, never while waiting.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "messages/errc.hpp"
#include "net/frame_guard.hpp"
#include "net/step_tls.hpp"

struct ssl_st;
struct pollfd;

namespace kvactor {

/// Polls `fds` without blocking until one is ready or `spin` has passed; whether one is. A thread
/// that spins before it blocks answers a frame without the wake-up of a sleeping core (tens of
/// microseconds on an idle many-core machine), at the price of a core while it spins.
bool spin_until_readable(pollfd* fds, size_t n, std::chrono::microseconds spin);

/// How the ends of a step channel prove who they are: mutual TLS when `tls` is set, else the
/// cluster cookie.
struct step_channel_auth {
  std::string cookie;
  std::shared_ptr<step_tls> tls;
};

class step_socket {
public:
  /// Takes a connected descriptor (tcp_connect, accept) and turns Nagle's algorithm off.
  explicit step_socket(int fd);
  ~step_socket();
  step_socket(const step_socket&) = delete;
  step_socket& operator=(const step_socket&) = delete;

  int fd() const { return fd_; }

  /// Every byte, or errc::io_error with the reason.
  status write_all(const char* data, size_t n);
  /// What has arrived, waiting for some at most `timeout` (none: as long as it takes). 0: the
  /// peer closed the connection. errc::timeout when nothing came in time.
  expected<size_t> read_some(char* buf, size_t n,
                             std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  /// Wakes a reader blocked in read_some (which then sees the connection closed); the descriptor
  /// stays open until destruction, so no other socket can take its number meanwhile.
  void shut_down();

  /// The TLS handshake as `side` within `timeout`; reads and writes are encrypted from then on.
  /// The error says why (no certificate of the CA, a peer that does not speak TLS).
  status start_tls(const step_tls& tls, connection_side side, std::chrono::milliseconds timeout);
  /// Decrypted bytes wait in the TLS session (a poll on the descriptor would not see them).
  bool has_buffered();

private:
  expected<size_t> read_tls(char* buf, size_t n, std::optional<std::chrono::milliseconds> timeout);
  status write_tls(const char* data, size_t n);

  int fd_;
  ssl_st* ssl_ = nullptr;
  std::mutex ssl_mu_;
};

/// A listening socket on host:port (0: any free port); its descriptor and the bound port.
struct step_listener {
  int fd = -1;
  uint16_t port = 0;
};
expected<step_listener> listen_tcp(const std::string& host, uint16_t port);

/// Both ends prove the cluster cookie (peer_auth), each message within `timeout`; the error says
/// what did not match or what timed out.
status prove_cookie(step_socket& s, connection_side side, const std::string& cookie,
                    std::chrono::milliseconds timeout);

/// The TLS handshake with `auth.tls`, else the cookie proof.
status authenticate(step_socket& s, connection_side side, const step_channel_auth& auth,
                    std::chrono::milliseconds timeout);

} // namespace kvactor
