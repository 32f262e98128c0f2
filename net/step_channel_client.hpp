// The driver's end of the step channel (cluster mode, step_frame.hpp): one connection to each
// node that offers one (node_info.step_port), proven with the cluster cookie or mutual TLS. The
// driver's thread
// writes a step to a node's socket itself; one reader thread waits on every socket and turns each
// answer into a node_channel_event for the driver. A connection that closes or sends a frame the
// reader refuses is reported lost once, and the driver's steps for that node go through the
// middleman from then on: the channel never decides a step's fate alone.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "actors/driver/node_channel.hpp"
#include "net/step_socket.hpp"

namespace kvactor {

/// Where a node's step channel listens: host:port, port 0 when the node offers none.
struct step_channel_endpoint {
  std::string host;
  uint16_t port = 0;
};

class step_channel_client final : public node_step_channel {
public:
  using sink = std::function<void(node_channel_event)>;

  /// Connects to and authenticates with each endpoint with a port, within `timeout` each.
  /// Routes without a port, and routes that cannot be reached or refuse the proof, stay closed
  /// (their steps take the middleman; why() says what happened).
  static std::shared_ptr<step_channel_client>
  connect(const std::vector<step_channel_endpoint>& routes, const step_channel_auth& auth,
          uint64_t max_frame_bytes, std::chrono::milliseconds timeout);

  /// Why route `route` has no channel ("" while it is open, or when it was never offered one).
  std::string why(size_t route) const;

  ~step_channel_client() override;

  /// Starts the reader: every answer, refusal and loss goes to `to_driver` (from its thread).
  /// With `spin`, the reader polls that long before it blocks (spin_until_readable).
  void start(sink to_driver, std::chrono::microseconds spin = {});

  bool open(size_t route) const override;
  status send(size_t route, uint64_t seq, const node_step& step) override;

private:
  struct route_socket;
  step_channel_client(std::vector<std::unique_ptr<route_socket>> routes,
                      std::vector<std::string> why_closed, uint64_t max_frame_bytes);
  void read_loop();
  /// Reads what route `r` sent; false once it is lost.
  bool read_route(route_socket& r, std::vector<char>& buf);
  /// Closes route `r` and reports it lost; false.
  bool lose(route_socket& r, const error& why);

  std::vector<std::unique_ptr<route_socket>> routes_;
  std::vector<std::string> why_closed_; // [routes]: why a route could not connect
  uint64_t max_frame_bytes_;
  int wake_[2] = {-1, -1}; // written by the destructor to end read_loop
  sink to_driver_;
  std::chrono::microseconds spin_{0};
  std::atomic<bool> stopping_{false};
  std::thread reader_;
};

} // namespace kvactor
