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
#include "deploy/serving_engine.hpp"
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
  std::ostream& err;
  loaded_model model; // once the run is configured (its length known)
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

// The model's tokenizer and template, and the ingress in front of the engine.
expected<output_sink_actor> start_front(serve_session& s, caf::actor_system& sys,
                                        const run_configuration& run) {
  auto model = load_served_model(s.flags.engine.model, s.flags.served_model_name,
                                 s.flags.chat_template, run.configs.front().max_model_len);
  if (!model) return model.err();
  s.model = std::move(*model);
  s.ing = sys.spawn(ingress, ingress_setup{s.model.served,
                                           {static_cast<size_t>(s.flags.max_waiting_requests)},
                                           {},
                                           s.inbox,
                                           s.flags.seed,
                                           s.board});
  return caf::actor_cast<output_sink_actor>(s.ing);
}

engine_hooks hooks_of(serve_session& s) {
  engine_hooks h;
  h.on_system = [&s](caf::actor_system& sys, const run_configuration& run) {
    return start_front(s, sys, run);
  };
  h.on_ready = [&s](const driver_actor& drv, const std::vector<rank_ready>& ready) {
    return on_engine_ready(s, drv, ready);
  };
  h.on_end = [&s](caf::actor_system& sys) { shut_down(sys, s); };
  h.interrupts = &s.interrupts;
  h.metrics = &s.metrics;
  return h;
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
  const auto flags = engine_run_flags(f.engine, f.seed, f.cluster);
  auto options = check_run_flags(flags);
  if (!options) return refuse_serve(err, options.err().message);
  auto body_limit = parse_byte_size(f.max_body_bytes, "--max-body-bytes");
  if (!body_limit) return refuse_serve(err, body_limit.err().message);
  if (auto why = check_serve_flags(f)) return refuse_serve(err, *why);
  serve_session s{f, err, {}, {}};
  s.http.host = f.host;
  s.http.port = f.port;
  s.http.max_body_bytes = static_cast<size_t>(*body_limit);
  auto hooks = hooks_of(s);
  const auto session = serve_engine(flags, *options, hooks, err);
  if (session.failure) {
    refuse_serve(err, session.failure->err.message);
    return session.failure->exit_code;
  }
  {
    std::lock_guard lock(s.watch->mu);
    if (!s.watch->lost.empty()) {
      fmt::print(err, "kvactor serve: error: {}\n", s.watch->lost);
      return exit_failure;
    }
  }
  if (session.summary.error.code != errc::no_error) { // a rank or node was lost: not a clean stop
    fmt::print(err, "kvactor serve: error: the engine stopped: {}\n",
               session.summary.error.message);
    return exit_failure;
  }
  fmt::print(out, "kvactor serve: stopped ({} requests finished, {} failed)\n",
             session.summary.finished, session.summary.failed);
  return exit_ok;
}

} // namespace kvactor
