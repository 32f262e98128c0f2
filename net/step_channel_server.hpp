// The node's end of the step channel (cluster mode, step_frame.hpp): a listening socket beside the
// node's middleman port, whose connections carry node_step frames from a driver. Each connection
// is served by a thread of its own that authenticates the driver first (the cluster cookie on
// loopback, mutual TLS with the node's certificates otherwise), then hands every step to the node
// actor. The node actor relays it as it does a step that came through the middleman (so silent
// ranks, collective failures and slot checks answer alike on both paths) and writes the gathered
// answer to the connection itself, through the connection's sink (actors/node/step_sinks.hpp):
// one thread wake-up fewer than waiting for it here.
//
// Hostile bytes: a connection that does not prove itself within the proof timeout, sends a
// frame above --max-message-bytes, an unknown kind or a step that does not parse is closed and
// counted; the node and its other connections go on. At most `max_connections` proven connections
// are served at once; of the connections still proving themselves at most `max_pending` wait, and
// a newer one evicts the oldest (a flood of silent connections cannot lock a driver out).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "actors/node/step_sinks.hpp"
#include "messages/errc.hpp"
#include "net/rate_limited_log.hpp"
#include "net/step_socket.hpp"

namespace kvactor {

struct step_channel_limits {
  uint64_t max_frame_bytes = uint64_t{64} << 20;
  std::chrono::milliseconds proof_timeout{10'000};
  size_t max_connections = 8;
  size_t max_pending = 64;
  std::chrono::microseconds spin{0}; // a connection's thread polls this long before it blocks
};

struct step_channel_counts {
  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> refused_auth{0};   // closed: no or a wrong cookie proof or certificate
  std::atomic<uint64_t> refused_frames{0}; // closed: a frame refused
  std::atomic<uint64_t> refused_full{0};   // closed: max_connections were served
  std::atomic<uint64_t> evicted{0};        // closed unproven, to make room for a newer one
  std::atomic<uint64_t> steps{0};          // frames taken from drivers
};

class step_channel_server {
public:
  /// Listens on host:port (0: a free port) for drivers that prove themselves with `auth`.
  static expected<std::unique_ptr<step_channel_server>> listen(const std::string& host,
                                                               uint16_t port,
                                                               step_channel_auth auth,
                                                               step_channel_limits limits);

  ~step_channel_server();
  step_channel_server(const step_channel_server&) = delete;
  step_channel_server& operator=(const step_channel_server&) = delete;

  uint16_t port() const { return port_; }
  const step_channel_counts& counts() const { return counts_; }

  /// Where the node actor finds each connection's answer sink: give it to the node's setup.
  const std::shared_ptr<step_sinks>& sinks() const { return sinks_; }

  /// Starts accepting: every step goes to `node` (spawned with sinks()).
  void serve(node_actor node);

private:
  struct connection;
  step_channel_server(int listen_fd, uint16_t port, step_channel_auth auth,
                      step_channel_limits limits);
  void accept_loop();
  void admit(int fd);
  /// Under mu_: the proven connections, and the oldest unproven one if max_pending wait.
  size_t count_proven() const;
  void evict_oldest_pending();
  /// The cookie proof, then a place among the proven connections; false: closed.
  bool admit_proven(connection& c);
  void serve_connection(connection& c);
  void relay_steps(connection& c);
  void reap_finished();

  int listen_fd_;
  int wake_[2] = {-1, -1}; // written by the destructor to end accept_loop
  uint16_t port_;
  step_channel_auth auth_;
  step_channel_limits limits_;
  node_actor node_;
  std::shared_ptr<step_sinks> sinks_ = std::make_shared<step_sinks>();
  step_channel_counts counts_;
  rate_limited_log log_{"node: step channel"};
  std::mutex mu_;
  std::list<std::unique_ptr<connection>> connections_;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
};

} // namespace kvactor
