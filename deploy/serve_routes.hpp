// `kvactor serve`'s routes: what each method and path of the HTTP server does. Generation calls go
// to the ingress actor's inbox (the HTTP threads never block on the actors); the rest is answered
// here: /health, /version, /v1/models, OpenAI's error object for an unknown path, a wrong
// method or a missing API key.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "actors/ingress/inbox.hpp"
#include "actors/interfaces.hpp"
#include "messages/engine_config.hpp"
#include "net/http/server.hpp"

namespace kvactor {

/// What the routes answer with; max_model_len (the scheduler's limits as resolved) for /v1/models.
struct route_setup : scheduler_limits {
  std::string model_name;
  std::string api_key; // empty: none asked
  ingress_actor ingress;
  std::shared_ptr<ingress_inbox> inbox;
};

/// The HTTP server's handler.
http::handler make_routes(route_setup setup);

} // namespace kvactor
