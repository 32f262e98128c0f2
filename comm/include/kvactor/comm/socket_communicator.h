// The socket communicator: tensor-parallel CPU ranks in different processes (cluster mode), the
// host communicator's contract over TCP. Rank 0 listens; the driver hands its address to every
// rank in the communicator_id (as it hands out an NCCL id); every rank connects to rank 0. Each
// collective is a star: every rank sends its contribution tagged with (sequence number, kind,
// op, dtype, count, root); rank 0 checks the tags (a mismatch aborts, naming both), reduces in
// rank order exactly as the host communicator does and sends the one result back, so results are
// bit-identical on every rank and identical to an in-process group.
//
// Never a hang: every wait has the communicator's deadline; a peer that dies closes its socket and
// its peers fail at once (transport); abort() shuts every socket down so that peers fail too.
// Blocking, one thread per rank; POSIX sockets, no CAF.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "kvactor/comm/communicator.h"

namespace kvactor::comm {

/// Rank 0's rendezvous: a listening TCP socket on `host` (port 0: any free port).
class socket_listener {
public:
  /// Throws collective_error (transport) when the address cannot be bound.
  static std::unique_ptr<socket_listener> open(const std::string& host, uint16_t port = 0);
  ~socket_listener();
  socket_listener(const socket_listener&) = delete;
  socket_listener& operator=(const socket_listener&) = delete;

  /// "host:port", the communicator id's bytes.
  std::string address() const;
  int release(); // hands the socket over (to rank 0's communicator)

private:
  socket_listener(int fd, std::string host, uint16_t port)
      : fd_(fd), host_(std::move(host)), port_(port) {}
  int fd_;
  std::string host_;
  uint16_t port_;
};

struct socket_options {
  std::chrono::milliseconds timeout{120'000}; // joining, and every collective
};

/// Rank `rank` of `world_size` joins the group whose rank 0 listens at `address` ("host:port");
/// rank 0 passes its listener (the others pass null). Every rank must call this concurrently.
/// Returns once all ranks are connected. Throws collective_error: invalid_argument (address,
/// rank, world, a missing listener), timeout (a peer did not join within options.timeout, naming
/// the missing ranks), transport (connect or handshake failed).
std::shared_ptr<communicator> make_socket_communicator(const std::string& address, int world_size,
                                                       int rank,
                                                       std::unique_ptr<socket_listener> listener,
                                                       const socket_options& options);

} // namespace kvactor::comm
