#include "deploy/serve_command.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/ingress/actor.hpp"
#include "deploy/cli.hpp"
#include "deploy/interrupt.hpp"
#include "deploy/run_metrics.hpp"
#include "deploy/run_modes.hpp"
#include "deploy/run_report.hpp"
#include "deploy/serve_routes.hpp"
#include "deploy/served_model.hpp"
#include "messages/byte_size.hpp"
#include "messages/register.hpp"
#include "model/hf_decoder.hpp"

namespace kvactor {

namespace {

int refuse_serve(std::ostream& err, const std::string& message) {
  fmt::print(err, "kvactor serve: error: {}\n", message);
  return exit_bad_input;
}

std::string api_key_of(const serve_flags& s) {
  if (!s.api_key.empty()) return s.api_key;
  const char* env = std::getenv("KVACTOR_API_KEY");
  return env == nullptr ? std::string{} : std::string{env};
}

// Why the ingress stopped when nobody asked it to; empty while it runs. Written by the CAF thread
// that ran its exit, read once the session ended.
struct ingress_watch {
  std::mutex mu;
  std::string lost; // GUARDED_BY(mu)
};

// What one `kvactor serve` holds from start to shutdown.
struct serve_session {
  const serve_flags& flags;
  loaded_model& model;
  std::ostream& err;
  ingress_actor ing;
  std::shared_ptr<ingress_inbox> inbox = std::make_shared<ingress_inbox>();
  std::shared_ptr<counts_board> board = std::make_shared<counts_board>();
  std::shared_ptr<std::atomic<bool>> draining = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<ingress_watch> watch = std::make_shared<ingress_watch>();
  served_metrics metrics{std::make_shared<run_metrics>(), nullptr};
  interrupt_watch interrupts;
  http::server_options http;
  std::unique_ptr<http::server> server;
};

route_setup routes_of(serve_session& s) {
  route_setup r;
  take<scheduler_limits>(r, s.model.served);
  r.model_name = s.model.served.name;
  r.api_key = api_key_of(s.flags);
  r.ingress = s.ing;
  r.inbox = s.inbox;
  r.board = s.board;
  r.metrics = s.metrics.metrics;
  r.draining = s.draining;
  return r;
}

// A signal drains the server (see run_serve); a second one exits at once (interrupt_watch).
void drain_on_signal(serve_session& s) {
  const double grace_s = s.flags.shutdown_timeout_s;
  s.interrupts.on_interrupt([&s, grace_s](int sig) {
    s.draining->store(true);
    spdlog::info("{}: Shutting down: new requests get 503; those in flight have {} s to finish "
                 "(--shutdown-timeout); a second signal exits at once",
                 signal_name(sig), grace_s);
    const auto grace =
        std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(grace_s));
    caf::anon_send(s.ing, atom::drain_v, grace,
                   fmt::format("the server shut down before this request finished "
                               "(--shutdown-timeout {} s)",
                               grace_s));
  });
}

// The ingress must not stop on its own: if it does, the engine stops too, and serve exits 1.
void watch_ingress(serve_session& s, const driver_actor& drv) {
  auto* ing = caf::actor_cast<caf::abstract_actor*>(s.ing);
  ing->attach_functor([drv, watch = s.watch](const caf::error& reason) {
    if (!reason || reason == caf::exit_reason::user_shutdown) return;
    const auto why = fmt::format("the server's ingress stopped: {}", to_string(reason));
    spdlog::error("{}", why);
    {
      std::lock_guard lock(watch->mu);
      watch->lost = why;
    }
    caf::anon_send(drv, atom::drain_v, why);
  });
}

std::optional<run_failure> on_engine_ready(serve_session& s, const driver_actor& drv,
                                           const std::vector<rank_ready>& ready) {
  s.metrics.ready(ready);
  caf::anon_send(s.ing, atom::start_v, caf::actor_cast<caf::actor>(drv), ready.front().vocab_size);
  watch_ingress(s, drv);
  auto started = http::server::start(s.http, make_routes(routes_of(s)));
  if (!started) return run_failure{exit_bad_input, started.err()};
  s.server = std::move(*started);
  drain_on_signal(s);
  spdlog::info("Started server process");
  fmt::print(s.err, "kvactor serve: {} listening on http://{}:{} (Press CTRL+C to quit)\n",
             s.model.served.name, s.flags.host, s.server->port());
  s.err.flush();
  spdlog::info("Application startup complete.");
  return std::nullopt;
}

// After the engine stopped: every client's answer is sent (the ingress has handled the engine's
// last updates once it answers), then the connections close.
void shut_down(caf::actor_system& sys, serve_session& s) {
  caf::scoped_actor self{sys};
  self->request(s.ing, std::chrono::seconds(10), atom::stats_v)
      .receive([](int64_t) {}, [](const caf::error&) {});
  if (s.server) {
    const size_t cut = s.server->finish(std::chrono::steady_clock::now() + std::chrono::seconds(5));
    if (cut > 0) spdlog::warn("{} connection(s) still open at exit were closed", cut);
  }
  caf::anon_send_exit(s.ing, caf::exit_reason::user_shutdown);
  spdlog::info("Application shutdown complete.");
}

local_serving serving_of(const run_flags& flags, const local_start& start, serve_session& s) {
  local_serving serving{flags, start.run, start.tp, nullptr, {}};
  serving.interrupts = &s.interrupts;
  serving.metrics = &s.metrics;
  serving.outputs = caf::actor_cast<output_sink_actor>(s.ing);
  serving.keep_serving = true;
  serving.chaos.deadlines.step_timeout = {}; // a long CPU prompt may take minutes
  serving.on_ready = [&s](const driver_actor& drv, const std::vector<rank_actor>&,
                          const std::vector<rank_ready>& ready) {
    return on_engine_ready(s, drv, ready);
  };
  return serving;
}

std::optional<std::string> check_serve_flags(const serve_flags& s) {
  if (s.max_waiting_requests < 1)
    return fmt::format("--max-waiting-requests: {} is not >= 1", s.max_waiting_requests);
  if (!std::isfinite(s.shutdown_timeout_s) || s.shutdown_timeout_s < 0
      || s.shutdown_timeout_s > 86400)
    return fmt::format("--shutdown-timeout: {} is not a number of seconds in [0, 86400]",
                       s.shutdown_timeout_s);
  return std::nullopt;
}

} // namespace

int run_serve(const serve_flags& f, std::ostream& out, std::ostream& err) {
  const auto flags = engine_run_flags(f.engine, f.seed);
  auto options = check_run_flags(flags);
  if (!options) return refuse_serve(err, options.err().message);
  auto body_limit = parse_byte_size(f.max_body_bytes, "--max-body-bytes");
  if (!body_limit) return refuse_serve(err, body_limit.err().message);
  if (auto why = check_serve_flags(f)) return refuse_serve(err, *why);
  auto start = prepare_local_run(flags, *options);
  if (!start) return refuse_serve(err, start.err().message);
  auto model = load_served_model(f.engine.model, f.served_model_name, f.chat_template,
                                 start->run.configs.front().max_model_len);
  if (!model) return refuse_serve(err, model.err().message);
  caf::actor_system_config cfg;
  register_types(cfg);
  caf::actor_system sys{cfg};
  serve_session s{f, *model, err, {}};
  s.ing = sys.spawn(ingress, ingress_setup{model->served,
                                           {static_cast<size_t>(f.max_waiting_requests)},
                                           {},
                                           s.inbox,
                                           f.seed,
                                           s.board});
  s.http.host = f.host;
  s.http.port = f.port;
  s.http.max_body_bytes = static_cast<size_t>(*body_limit);
  const auto session = serve_locally(sys, serving_of(flags, *start, s), err);
  shut_down(sys, s);
  if (session.failure) return refuse_serve(err, session.failure->err.message);
  {
    std::lock_guard lock(s.watch->mu);
    if (!s.watch->lost.empty()) {
      fmt::print(err, "kvactor serve: error: {}\n", s.watch->lost);
      return exit_failure;
    }
  }
  fmt::print(out, "kvactor serve: stopped ({} requests finished, {} failed)\n",
             session.summary.finished, session.summary.failed);
  return exit_ok;
}

} // namespace kvactor
