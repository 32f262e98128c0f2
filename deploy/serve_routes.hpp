// `kvactor serve`'s routes: what each method and path of the HTTP server does. Generation and
// (de)tokenize calls go to the ingress actor's inbox (the HTTP threads never block on the
// actors); the rest is answered here: /health, /metrics, /version, /v1/models, OpenAI's error
// object for an unknown path, a wrong method or a missing API key.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "actors/ingress/counts_board.hpp"
#include "actors/ingress/inbox.hpp"
#include "actors/interfaces.hpp"
#include "deploy/run_metrics.hpp"
#include "messages/engine_config.hpp"
#include "net/http/server.hpp"

namespace kvactor {

/// What the routes answer with; max_model_len (the scheduler's limits as resolved) for /v1/models.
struct route_setup : scheduler_limits {
  std::string model_name;
  std::string api_key; // empty: none asked
  ingress_actor ingress;
  std::shared_ptr<ingress_inbox> inbox;
  std::shared_ptr<counts_board> board;         // the ingress's counts, for /metrics
  std::shared_ptr<run_metrics> metrics;        // the engine's, for /metrics; may be null
  std::shared_ptr<std::atomic<bool>> draining; // set at SIGTERM: /health answers 503
};

/// The ingress's counts in Prometheus' text format: answers by status code, requests in
/// flight, streams open.
std::string ingress_metrics_text(const openai::ingress_counts& c);

/// The HTTP server's handler.
http::handler make_routes(route_setup setup);

} // namespace kvactor
