#include "deploy/serving_engine.hpp"

#include <caf/all.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include "deploy/cli.hpp"
#include "deploy/run_modes.hpp"
#include "messages/register.hpp"

namespace kvactor {

namespace {

session_result refused(error e) {
  session_result s;
  s.failure = run_failure{exit_bad_input, std::move(e)};
  return s;
}

session_result serve_engine_locally(const run_flags& flags, const run_options& o,
                                    engine_hooks& hooks, std::ostream& err) {
  auto start = prepare_local_run(flags, o);
  if (!start) return refused(start.err());
  caf::actor_system_config cfg;
  register_types(cfg);
  caf::actor_system sys{cfg};
  auto front = hooks.on_system(sys, start->run);
  if (!front) return refused(front.err());
  local_serving serving{flags, start->run, start->tp, nullptr, {}};
  serving.interrupts = hooks.interrupts;
  serving.metrics = hooks.metrics;
  serving.outputs = *front;
  serving.keep_serving = true;
  serving.chaos.deadlines.step_timeout = {}; // a long CPU prompt may take minutes
  serving.on_ready = [&hooks](const driver_actor& drv, const std::vector<rank_actor>&,
                              const std::vector<rank_ready>& ready) {
    return hooks.on_ready(drv, ready);
  };
  auto session = serve_locally(sys, serving, err);
  hooks.on_end(sys);
  return session;
}

session_result serve_engine_on_nodes(const run_flags& flags, const run_options& o,
                                     engine_hooks& hooks) {
  session_result out;
  const auto code = with_cluster(flags, o, [&](cluster_context& c) {
    auto front = hooks.on_system(c.sys, c.run);
    if (!front) {
      out = refused(front.err());
      return exit_bad_input;
    }
    auto progress = std::function<void(const run_progress&)>{};
    if (hooks.metrics) progress = hooks.metrics->observing(std::move(progress));
    auto setup = cluster_driver_setup(c, o, std::move(progress), nullptr);
    setup.outputs = *front;
    setup.keep_serving = true;
    setup.deadlines.step_timeout = {}; // a long CPU prompt may take minutes; a lost node is seen
    auto drv = c.sys.spawn(driver, std::move(setup));
    attach_step_channels(c.channels, drv, o.step_spin);
    out = serve(
        c.sys, drv, {},
        [&](const std::vector<rank_ready>& ready) { return hooks.on_ready(drv, ready); },
        hooks.interrupts);
    caf::anon_send_exit(drv, caf::exit_reason::user_shutdown);
    hooks.on_end(c.sys);
    return exit_ok;
  });
  if (!code) return refused(code.err()); // before the engine started
  return out;
}

} // namespace

session_result serve_engine(const run_flags& flags, const run_options& options, engine_hooks& hooks,
                            std::ostream& err) {
  return options.cluster ? serve_engine_on_nodes(flags, options, hooks)
                         : serve_engine_locally(flags, options, hooks, err);
}

} // namespace kvactor
