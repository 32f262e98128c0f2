// `kvactor serve`: an OpenAI-compatible HTTP server over the actors. It loads the model once
// (local ranks), serves /v1/completions, /v1/chat/completions, /v1/models, /tokenize,
// /detokenize, /metrics, /health and /version until SIGINT or SIGTERM, then drains: new requests
// get 503, the ones in flight may finish within --shutdown-timeout, the rest fail with the
// reason, every answer is sent, and it exits 0.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "deploy/plan_command.hpp"
#include "deploy/served_model.hpp"

namespace kvactor {

struct serve_flags {
  /// The engine flags `run` takes (model directory, device, tensor-parallel size, dtypes, KV
  /// cache, graphs), checked as run checks them.
  plan_flags engine;
  cluster_flags cluster; // --nodes: the ranks on kvactor node processes
  std::string host = "127.0.0.1";
  uint16_t port = 8000;                // 0: any free port (the log says which)
  std::string served_model_name;       // empty: the model directory's name
  std::string api_key;                 // empty: KVACTOR_API_KEY, else none asked
  std::string chat_template;           // a file; empty: the model directory's
  int64_t max_waiting_requests = 4096; // requests served at once; more get 429
  std::string max_body_bytes = "32MiB";
  double shutdown_timeout_s = 30; // after SIGTERM: how long requests in flight may take
  uint64_t seed = 0;
};

int run_serve(const serve_flags& flags, std::ostream& out, std::ostream& err);

} // namespace kvactor
