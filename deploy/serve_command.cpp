#include "deploy/serve_command.hpp"

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/ingress/actor.hpp"
#include "deploy/cli.hpp"
#include "deploy/interrupt.hpp"
#include "deploy/run_modes.hpp"
#include "deploy/serve_routes.hpp"
#include "messages/byte_size.hpp"
#include "messages/register.hpp"
#include "model/hf_decoder.hpp"

namespace kvactor {

namespace {

int bad(std::ostream& err, const std::string& message) {
  fmt::print(err, "kvactor serve: error: {}\n", message);
  return exit_bad_input;
}

// The engine as `run` configures it, with no synthetic workload.
run_flags engine_flags(const serve_flags& s) {
  run_flags f;
  f.plan = s.engine;
  f.requests = 0;
  f.prompt_len = "1";
  f.output_len = "1";
  f.progress = false;
  f.seed = s.seed;
  return f;
}

// What the ingress serves: the model's name, tokenizer, template and length.
struct loaded_model {
  std::unique_ptr<tokenizer> tok; // on the heap: `served` points at them
  std::unique_ptr<chat_template> chat;
  openai::served_model served;
};

expected<loaded_model> load_model(const serve_flags& s, int64_t max_model_len) {
  loaded_model m;
  auto tok = load_tokenizer(s.engine.model);
  if (!tok) return make_error(tok.err().code, fmt::format("--model: {}", tok.err().message));
  m.tok = std::move(*tok);
  auto chat = chat_template::load(s.engine.model, s.chat_template);
  if (chat) {
    m.chat = std::make_unique<chat_template>(std::move(*chat));
    spdlog::info("Using the chat template of {}", m.chat->source());
  } else if (chat.err().code != errc::missing_field || !s.chat_template.empty()) {
    return chat.err();
  } else {
    spdlog::warn("{}: /v1/chat/completions answers 400", chat.err().message);
  }
  auto eos = model_eos_token_ids(s.engine.model);
  if (!eos) return eos.err();
  m.served.name = s.served_model_name.empty()
                      ? std::filesystem::path(s.engine.model).lexically_normal().filename().string()
                      : s.served_model_name;
  if (m.served.name.empty()) m.served.name = s.engine.model;
  m.served.tok = m.tok.get();
  m.served.chat = m.chat.get();
  m.served.eos_token_ids = *eos;
  m.served.max_model_len = max_model_len;
  return m;
}

std::string api_key_of(const serve_flags& s) {
  if (!s.api_key.empty()) return s.api_key;
  const char* env = std::getenv("KVACTOR_API_KEY");
  return env == nullptr ? std::string{} : std::string{env};
}

} // namespace

int run_serve(const serve_flags& s, std::ostream& out, std::ostream& err) {
  const auto flags = engine_flags(s);
  auto options = check_run_flags(flags);
  if (!options) return bad(err, options.err().message);
  auto body_limit = parse_byte_size(s.max_body_bytes, "--max-body-bytes");
  if (!body_limit) return bad(err, body_limit.err().message);
  if (s.max_waiting_requests < 1)
    return bad(err, fmt::format("--max-waiting-requests: {} is not >= 1", s.max_waiting_requests));
  auto start = prepare_local_run(flags, *options);
  if (!start) return bad(err, start.err().message);
  auto model = load_model(s, start->run.configs.front().max_model_len);
  if (!model) return bad(err, model.err().message);
  caf::actor_system_config cfg;
  register_types(cfg);
  caf::actor_system sys{cfg};
  auto inbox = std::make_shared<ingress_inbox>();
  auto ing = sys.spawn(
      ingress,
      ingress_setup{
          model->served, {static_cast<size_t>(s.max_waiting_requests)}, {}, inbox, s.seed});
  route_setup routes;
  take<scheduler_limits>(routes, model->served);
  routes.model_name = model->served.name;
  routes.api_key = api_key_of(s);
  routes.ingress = ing;
  routes.inbox = inbox;
  http::server_options http_options;
  http_options.host = s.host;
  http_options.port = s.port;
  http_options.max_body_bytes = static_cast<size_t>(*body_limit);
  std::unique_ptr<http::server> server;
  interrupt_watch interrupts;
  local_serving serving{flags, start->run, start->tp, nullptr, {}};
  serving.interrupts = &interrupts;
  serving.outputs = caf::actor_cast<output_sink_actor>(ing);
  serving.keep_serving = true;
  serving.chaos.deadlines.step_timeout = {}; // a long CPU prompt may take minutes
  serving.on_ready = [&](const driver_actor& drv, const std::vector<rank_actor>&,
                         const std::vector<rank_ready>& ready) -> std::optional<run_failure> {
    caf::anon_send(ing, atom::start_v, caf::actor_cast<caf::actor>(drv), ready.front().vocab_size);
    auto started = http::server::start(http_options, make_routes(routes));
    if (!started) return run_failure{exit_bad_input, started.err()};
    server = std::move(*started);
    spdlog::info("Started server process");
    fmt::print(err, "kvactor serve: {} listening on http://{}:{} (Press CTRL+C to quit)\n",
               model->served.name, s.host, server->port());
    err.flush();
    spdlog::info("Application startup complete.");
    return std::nullopt;
  };
  const auto session = serve_locally(sys, serving, err);
  if (server) server->stop();
  caf::anon_send_exit(ing, caf::exit_reason::user_shutdown);
  if (session.failure) return bad(err, session.failure->err.message);
  fmt::print(out, "kvactor serve: stopped ({} requests finished, {} failed)\n",
             session.summary.finished, session.summary.failed);
  return exit_ok;
}

} // namespace kvactor
