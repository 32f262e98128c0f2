#include "deploy/metrics_server.hpp"

#include <fmt/format.h>
#include <httplib.h>

namespace kvactor {

expected<std::unique_ptr<metrics_server>>
metrics_server::start(std::shared_ptr<run_metrics> metrics, const std::string& host,
                      uint16_t port) {
  return start([metrics] { return metrics->prometheus_text(); },
               [metrics] { return metrics->health(); }, host, port);
}

expected<std::unique_ptr<metrics_server>>
metrics_server::start(std::function<std::string()> metrics, std::function<health_report()> health,
                      const std::string& host, uint16_t port) {
  std::unique_ptr<metrics_server> s(new metrics_server());
  s->http_ = std::make_unique<httplib::Server>();
  s->http_->Get("/metrics", [metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics(), "text/plain; version=0.0.4; charset=utf-8");
  });
  s->http_->Get("/health", [health](const httplib::Request&, httplib::Response& res) {
    const health_report h = health();
    res.status = h.http_status();
    res.set_content(h.text() + "\n", "text/plain; charset=utf-8");
  });
  const int bound = port == 0 ? s->http_->bind_to_any_port(host.c_str())
                              : (s->http_->bind_to_port(host.c_str(), port) ? port : -1);
  if (bound <= 0)
    return make_error(errc::io_error,
                      fmt::format("--metrics-port: cannot listen on {}:{}", host, port));
  s->port_ = static_cast<uint16_t>(bound);
  s->thread_ = std::thread([srv = s->http_.get()] { srv->listen_after_bind(); });
  return s;
}

metrics_server::~metrics_server() {
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
}

} // namespace kvactor
