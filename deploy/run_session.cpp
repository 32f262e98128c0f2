#include "deploy/run_session.hpp"

#include <chrono>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "deploy/cli.hpp"
#include "deploy/interrupt.hpp"
#include "messages/caf_error.hpp"

namespace kvactor {

int start_exit_code(const error& e) {
  switch (e.code) {
  case errc::step_failed:
  case errc::collective_failed:
  case errc::rank_lost: return exit_failure;
  default: return exit_bad_input;
  }
}

namespace {

// The first signal drains the driver; the watch forgets it once the session ends.
struct drain_on_interrupt {
  drain_on_interrupt(interrupt_watch* w, const driver_actor& drv) : watch(w) {
    if (!watch) return;
    watch->on_interrupt([drv](int sig) {
      spdlog::warn("{}: stopping: nothing more is admitted and every unfinished request fails; "
                   "a second signal exits at once",
                   signal_name(sig));
      caf::anon_send(drv, atom::drain_v,
                     fmt::format("interrupted ({}) before it finished", signal_name(sig)));
    });
  }
  ~drain_on_interrupt() {
    if (watch) watch->on_interrupt({});
  }
  interrupt_watch* watch;
};

} // namespace

session_result serve(caf::actor_system& sys, const driver_actor& drv,
                     const std::vector<request_spec>& workload, const on_ready_fn& on_ready,
                     interrupt_watch* interrupts) {
  const drain_on_interrupt drain{interrupts, drv};
  caf::scoped_actor self{sys};
  session_result out;
  auto failed_with = [&](int code) {
    return [&out, code](caf::error& e) { out.failure = run_failure{code, from_caf_error(e)}; };
  };
  const auto start = std::chrono::steady_clock::now();
  self->request(drv, caf::infinite, atom::start_v)
      .receive([&](std::vector<rank_ready>& r) { out.ready = std::move(r); },
               [&](caf::error& e) {
                 auto err = from_caf_error(e);
                 out.failure = run_failure{start_exit_code(err), std::move(err)};
               });
  out.ready_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!out.failure && on_ready) out.failure = on_ready(out.ready);
  if (!out.failure)
    self->request(drv, caf::infinite, atom::submit_v, workload)
        .receive([](int64_t) {}, failed_with(exit_failure));
  if (!out.failure)
    self->request(drv, caf::infinite, atom::run_v)
        .receive([&](run_summary& s) { out.summary = std::move(s); }, failed_with(exit_failure));
  if (interrupts) out.interrupted = interrupts->signal();
  return out;
}

} // namespace kvactor
