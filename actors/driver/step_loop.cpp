// The step loop: schedule a step, deliver it through the rank fabric, gather every rank's reply
// and apply the verdict; a failed collective or a silent rank ends the run, every request
// reported.
#include <algorithm>
#include <utility>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/driver/driver_parts.hpp"
#include "actors/driver/step_replies.hpp"
#include "actors/step_timeline.hpp"
#include "messages/caf_error.hpp"

namespace kvactor {

using driver_detail::driver_self;
using clock_type = std::chrono::steady_clock;

// The step in flight: its delivery to the ranks and their replies.
struct step_flight final : step_delivery {
  step_flight(driver_self s, step_plan p, clock_type::time_point t)
      : step_delivery(std::move(p)), self(s), t0(t), replies(s->state.setup.ranks.size()) {}
  void on_done(int32_t rank, step_done done) override;
  void on_failure(int32_t rank, error err, std::vector<uint64_t> ids) override;
  bool settled() const override {
    return !driver_detail::running(self->state) || replies.complete() || replies.closed();
  }
  std::vector<int32_t> silent() const override { return replies.silent(); }
  void on_deadline() override;

  driver_self self;
  clock_type::time_point t0; // scheduled (the step's time counts from here)
  step_replies replies;
};

namespace driver_detail {

namespace {

using flight_ptr = std::shared_ptr<step_flight>;

void send_step(driver_self self, step_plan plan, clock_type::time_point t0) {
  auto& st = self->state;
  auto f = std::make_shared<step_flight>(self, std::move(plan), t0);
  step_timeline::mark(f->plan().seq, -1, step_point::driver_plan);
  if (st.setup.recorder)
    for (size_t i = 0; i < st.setup.ranks.size(); ++i)
      st.setup.recorder->record("driver", rank_name(static_cast<int64_t>(i)), f->plan());
  st.flight = f;
  st.fabric->deliver(f, st.stats.step_ms());
}

// Every rank executed the step: its tokens go to the scheduler. A reply the scheduler refuses (a
// rank answered for other requests) fails the step's requests with the reason: none is lost.
void apply_step(driver_state& st, const step_plan& plan, const step_verdict& v,
                clock_type::time_point t0) {
  for (auto id : v.failed)
    st.sched->fail_request(id, v.why);
  if (plan.scheduled.empty() || !v.done) {
    settle(st);
    return;
  }
  if (auto ok = st.sched->apply(*v.done); !ok) {
    const auto why =
        fmt::format("step {}: the ranks' reply cannot be applied: {}", plan.seq, ok.err().message);
    spdlog::error("driver: {}", why);
    for (const auto& s : plan.scheduled)
      st.sched->fail_request(s.request_id, why);
    st.stats.count_step(*st.sched, *v.done, t0);
    settle(st);
  } else {
    if (st.setup.on_tokens) st.setup.on_tokens(v.done->sampled);
    st.stats.count_step(*st.sched, *v.done, t0);
    settle(st, v.done->sampled);
  }
  step_timeline::mark(v.done->seq, -1, step_point::driver_step_done);
}

// Every rank answered the step in flight (and no collective failed): act on the verdict.
void on_step_answered(driver_self self, const step_flight& f) {
  auto& st = self->state;
  if (!running(st)) return; // the run ended meanwhile (a rank stopped): nothing more to do
  const auto& plan = f.plan();
  const auto v = f.replies.verdict(plan);
  using action = step_verdict::action;
  if (v.what != action::apply) {
    spdlog::warn("driver: step {} rejected ({}); failing {} request(s)", plan.seq, v.why,
                 v.failed.size());
    for (auto id : v.failed)
      st.sched->fail_request(id, v.why);
    settle(st);
    if (v.what == action::resend) {
      // Re-sent even when nothing is left to schedule: it still carries finished_requests.
      send_step(self, without(plan, v.failed), f.t0);
      return;
    }
    if (v.what == action::consumed) st.seq = plan.seq + 1;
    st.phase = driver_phase::idle;
    self->send(self, atom::step_v);
    return;
  }
  apply_step(st, plan, v, f.t0);
  st.seq = plan.seq + 1;
  st.phase = driver_phase::idle;
  report(st);
  next_step(self); // directly: a message to itself would cost one more hop per step
}

// A collective of the step failed on some rank: its communicator is aborted and the group cannot
// take another step. Diagnose from every rank's ledger, fail the step's requests with the
// diagnosis and everything else unfinished, and end the run with that error, which also quotes
// the failing rank's own error. The ranks' errors are read once the ledgers are in: the first to
// arrive may be a peer's that only saw the abort, the timed-out rank's on its way (a remote
// rank's answer travels another path than its ledger's). The flight, kept alive by the closure,
// takes errors that arrive after it closed.
void stop_on_collective_failure(driver_self self, flight_ptr f) {
  const auto within =
      std::max(self->state.setup.collective_timeout, std::chrono::milliseconds(1000));
  driver_detail::gather_ledgers(self, within, [self, f](std::vector<rank_ledger> ledgers) {
    auto& st = self->state;
    if (!running(st)) return; // a rank died meanwhile: the run already ended with that
    const auto diagnosis = diagnose_collectives(ledgers);
    st.end.collectives = count_collective_outcomes(ledgers);
    const auto root = root_failure(f->replies.failures(), ledgers);
    const auto seq = f->plan().seq;
    const auto why = fmt::format("step {}: a collective failed: {}", seq, diagnosis);
    auto err = make_error(errc::collective_failed,
                          root.empty() ? why : fmt::format("{} (the failing rank: {})", why, root));
    spdlog::info("driver: {}", err.message);
    end_run(self, std::move(err), &f->plan(), why,
            fmt::format("not run: the tensor-parallel ranks stopped at step {} (a collective "
                        "failed)",
                        seq));
  });
}

// Nothing can run now: wait for an arrival, or fail what can never run (not a hang).
void on_nothing_to_run(driver_self self) {
  auto& st = self->state;
  if (st.arrivals.next_arrival_ns()) {
    self->delayed_send(self, std::chrono::milliseconds(1), atom::step_v);
    return;
  }
  for (auto id : st.sched->request_order()) {
    const auto* r = st.sched->find(id);
    if (r->st == request_state::status::waiting || r->st == request_state::status::running)
      st.sched->fail_request(id, "cannot be scheduled: the KV cache has too few blocks");
  }
  if (!st.setup.keep_serving) {
    finish_run(self);
    return;
  }
  settle(st);
  next_step(self); // tells the ranks to drop them, then waits for the next submission
}

} // namespace

} // namespace driver_detail

using namespace driver_detail;

void step_flight::on_done(int32_t rank, step_done done) {
  if (auto& rec = self->state.setup.recorder) rec->record(rank_name(rank), "driver", done);
  if (replies.on_done(rank, std::move(done)) && !replies.collective_failed())
    on_step_answered(self, *this);
}

void step_flight::on_failure(int32_t rank, error err, std::vector<uint64_t> ids) {
  if (auto& rec = self->state.setup.recorder)
    rec->record(rank_name(rank), "driver", step_rejected{plan().seq, rank, err, ids});
  const bool last = replies.on_error(rank, std::move(err), std::move(ids));
  // A failed collective: the peers may never answer this step (one may be stuck), so the
  // diagnosis starts now instead of after every reply.
  if (replies.collective_failed_now()) {
    replies.close();
    stop_on_collective_failure(self, std::static_pointer_cast<step_flight>(shared_from_this()));
  }
  if (last && !replies.collective_failed()) on_step_answered(self, *this);
}

// The step timeout passed with ranks silent: the run ends naming them, every request reported.
void step_flight::on_deadline() {
  auto& st = self->state;
  replies.close();
  std::vector<std::string> names;
  for (auto r : replies.silent())
    names.push_back(describe_rank(st, r));
  const auto why =
      fmt::format("step {}: {} did not answer within {:.1f} s (--step-timeout)", plan().seq,
                  fmt::join(names, ", "),
                  std::chrono::duration<double>(st.setup.deadlines.step_timeout).count());
  spdlog::error("driver: {}", why);
  end_run(self, make_error(errc::rank_lost, why), &plan(), why, fmt::format("not run: {}", why));
}

namespace driver_detail {

void next_step(driver_self self) {
  auto& st = self->state;
  if (st.phase != driver_phase::idle) return;
  const auto now_ns = static_cast<int64_t>(st.stats.elapsed_s() * 1e9);
  st.arrivals.admit_due(now_ns, *st.sched, st.stats.latencies());
  settle(st); // requests refused at admission
  if (!st.sched->has_work() && !st.sched->has_pending_finished()) {
    if (const auto next = st.arrivals.next_arrival_ns()) {
      const auto wait = std::chrono::nanoseconds(std::max<int64_t>(*next - now_ns, 0));
      self->delayed_send(self, wait, atom::step_v);
      return;
    }
    if (!st.setup.keep_serving) return finish_run(self);
    report(st); // serving: idle until a submission or a drain, and the metrics say so
    return;
  }
  auto plan = st.sched->schedule(st.seq, st.setup.epoch);
  if (!plan) {
    spdlog::error("driver: scheduling step {} failed: {}", st.seq, plan.err().message);
    // Requests that have not arrived yet are failed too: every submitted request is reported.
    fail_unfinished(st, plan.err().message);
    finish_run(self);
    return;
  }
  if (plan->scheduled.empty() && plan->new_requests.empty() && plan->finished_requests.empty()) {
    on_nothing_to_run(self);
    return;
  }
  st.phase = driver_phase::stepping;
  send_step(self, std::move(*plan), clock_type::now());
}

} // namespace driver_detail

} // namespace kvactor
