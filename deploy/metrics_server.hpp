// The HTTP side of --metrics-port: GET /metrics (Prometheus text) and GET /health (200 "ready",
// else 503 with the reason) of a run_metrics, from a thread of its own (cpp-httplib).
#pragma once

#include <cstdint>
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
