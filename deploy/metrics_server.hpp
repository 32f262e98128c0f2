// The HTTP side of --metrics-port: GET /metrics (Prometheus text) and GET /health (200 "ready",
// else 503 with the reason), answered from a thread of its own (cpp-httplib) by two callbacks
// (a run's run_metrics, or a node's state).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "deploy/run_metrics.hpp"
#include "messages/errc.hpp"

namespace httplib {
class Server;
}

namespace kvactor {

class metrics_server {
public:
  /// Listens on host:port (port 0: any free port) and serves until destroyed. Fails, naming the
  /// flag and the address, when it cannot listen there.
  /// metrics() and health() are called from the server's thread.
  static expected<std::unique_ptr<metrics_server>> start(std::function<std::string()> metrics,
                                                         std::function<health_report()> health,
                                                         const std::string& host, uint16_t port);
  /// A run's: its run_metrics' text and health.
  static expected<std::unique_ptr<metrics_server>> start(std::shared_ptr<run_metrics> metrics,
                                                         const std::string& host, uint16_t port);
  metrics_server(const metrics_server&) = delete;
  metrics_server& operator=(const metrics_server&) = delete;
  ~metrics_server(); // stops listening and joins the thread

  uint16_t port() const { return port_; }

private:
  metrics_server() = default;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  uint16_t port_ = 0;
};

} // namespace kvactor
