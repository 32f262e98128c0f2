#include "actors/driver/actor.hpp"
#include "actors/driver/driver_parts.hpp"
#include "actors/step_timeline.hpp"

#include <algorithm>
#include <set>
#include <utility>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/driver/step_replies.hpp"
#include "actors/shared_request.hpp"
#include "actors/unexpected.hpp"
#include "messages/caf_error.hpp"
#include "messages/codec.hpp"

namespace kvactor {

namespace {

using clock_type = std::chrono::steady_clock;
using self_ptr = driver_actor::stateful_pointer<driver_state>;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  auto idx = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(idx, v.size() - 1)];
}

double elapsed_s(const driver_state& st) {
  return std::chrono::duration<double>(clock_type::now() - st.started).count();
}

request_result result_of(const request_state& r) {
  request_result res;
  res.request_id = r.id;
  res.finished = r.st == request_state::status::finished;
  res.output = r.output;
  res.num_preemptions = r.num_preemptions;
  res.failure = r.failure;
  res.reason = r.reason;
  return res;
}

run_summary summarize(const driver_state& st) {
  run_summary s;
  const auto& sched = *st.sched;
  for (auto id : sched.request_order()) {
    const auto* r = sched.find(id);
    s.generated_tokens += static_cast<int64_t>(r->output.size());
    s.results.push_back(result_of(*r));
  }
  s.finished = sched.num_finished();
  s.failed = sched.num_failed();
  s.preempted = sched.num_preemptions();
  s.prompt_tokens = st.prompt_tokens;
  s.steps = st.steps;
  s.wall_s = elapsed_s(st);
  s.step_ms_p50 = percentile(st.step_ms, 0.50);
  s.step_ms_p99 = percentile(st.step_ms, 0.99);
  const auto lat = st.latencies.summarize();
  s.ttft_ms_p50 = lat.ttft_ms_p50;
  s.ttft_ms_p99 = lat.ttft_ms_p99;
  s.tpot_ms_p50 = lat.tpot_ms_p50;
  s.tpot_ms_p99 = lat.tpot_ms_p99;
  s.e2e_ms_p50 = lat.e2e_ms_p50;
  s.e2e_ms_p99 = lat.e2e_ms_p99;
  s.kv_blocks_total = st.num_blocks - 1; // block 0 is the null block
  s.kv_blocks_peak_used = sched.peak_blocks_used();
  s.kv_blocks_held_at_end = sched.pool().num_used();
  s.graph_replays = st.graph_replays;
  s.eager_steps = st.eager_steps;
  s.prefix_hit_tokens = sched.num_prefix_hit_tokens();
  s.output_digest = output_digest(s.results);
  s.error = st.error;
  return s;
}

// Every link's faults, summed (--chaos).
link_counts chaos_counts(const driver_state& st) {
  link_counts sum;
  for (const auto* links : {&st.to_rank, &st.from_rank})
    for (const auto& l : *links) {
      sum.messages += l.counts().messages;
      sum.dropped += l.counts().dropped;
      sum.duplicated += l.counts().duplicated;
      sum.delayed += l.counts().delayed;
    }
  return sum;
}

void report(driver_state& st) {
  if (!st.setup.on_progress) return;
  run_progress p;
  p.steps = st.steps;
  p.finished = st.sched->num_finished();
  p.failed = st.sched->num_failed();
  p.total = static_cast<int64_t>(st.pending.size());
  for (auto id : st.sched->request_order())
    p.generated_tokens += static_cast<int64_t>(st.sched->find(id)->output.size());
  p.prompt_tokens = st.prompt_tokens;
  p.running = st.sched->num_running();
  p.waiting = st.sched->num_waiting();
  p.kv_blocks_used = st.sched->pool().num_used();
  p.kv_blocks_total = st.num_blocks - 1;
  p.preemptions = st.sched->num_preemptions();
  p.graph_replays = st.graph_replays;
  p.eager_steps = st.eager_steps;
  p.collective_timeouts = st.collectives.timed_out;
  p.collective_failures = st.collectives.failed;
  p.prefix_hit_tokens = st.sched->num_prefix_hit_tokens();
  p.chaos = chaos_counts(st);
  p.steps_resent = st.steps_resent;
  p.elapsed_s = elapsed_s(st);
  p.step_s = std::exchange(st.events.step_s, {});
  p.ttft_s = std::exchange(st.events.ttft_s, {});
  p.tpot_s = std::exchange(st.events.tpot_s, {});
  p.e2e_s = std::exchange(st.events.e2e_s, {});
  st.setup.on_progress(p);
}

void next_step(self_ptr self);

// Answers every request_await whose request is done.
void deliver_awaited(driver_state& st) {
  for (auto it = st.awaits.begin(); it != st.awaits.end();) {
    const request_state* r = st.sched ? st.sched->find(it->first) : nullptr;
    if (r == nullptr || !is_done(*r)) {
      ++it;
      continue;
    }
    it->second.deliver(result_of(*r));
    it = st.awaits.erase(it);
  }
}

void finish_run(self_ptr self) {
  auto& st = self->state;
  st.running = false;
  st.finished = true;
  auto s = summarize(st);
  report(st);
  spdlog::info("driver: {} finished, {} failed, {} steps in {:.2f} s", s.finished, s.failed,
               s.steps, s.wall_s);
  if (st.setup.chaos) {
    const auto c = chaos_counts(st);
    spdlog::warn("driver: --chaos: {} messages, {} lost, {} repeated, {} late; {} step copies "
                 "re-sent",
                 c.messages, c.dropped, c.duplicated, c.delayed, st.steps_resent);
  }
  st.done.deliver(std::move(s));
  deliver_awaited(st);
}

// Fails every request that has not finished (those not yet arrived too), with `why`.
void fail_unfinished(driver_state& st, const std::string& why) {
  while (st.next_arrival < st.pending.size()) {
    auto& r = st.pending[st.next_arrival++];
    (void)st.sched->add_request(r.request_id, r.prompt, r.max_output_tokens, r.sampling);
  }
  for (auto id : st.sched->request_order()) {
    const auto* r = st.sched->find(id);
    if (r->st == request_state::status::waiting || r->st == request_state::status::running)
      st.sched->fail_request(id, why);
  }
}

// A collective of step `plan` failed on some rank: its communicator is aborted and the group
// cannot take another step. Diagnose from every rank's ledger, fail the step's requests with the
// diagnosis and everything else unfinished, and end the run with that error, which also quotes
// the failing rank's own error. The ranks' errors are read once the ledgers are in: the first
// to arrive may be a peer's that only saw the abort, the timed-out rank's on its way. A local
// rank answers its step before the ledger request queued behind it; a remote rank's answer
// travels another path (its node's channel or the middleman) and may still come later.
void stop_on_collective_failure(self_ptr self, const step_plan& plan,
                                std::shared_ptr<const step_replies> replies) {
  auto& st = self->state;
  const auto within = std::max(st.setup.collective_timeout, std::chrono::milliseconds(1000));
  driver_detail::gather_ledgers(
      self, within, [self, plan, replies](std::vector<rank_ledger> ledgers) {
        auto& st = self->state;
        if (!st.running) return; // a rank died meanwhile: the run already ended with that
        const auto diagnosis = diagnose_collectives(ledgers);
        st.collectives = count_collective_outcomes(ledgers);
        const auto root = root_failure(replies->failures(), ledgers);
        const auto why = fmt::format("step {}: a collective failed: {}", plan.seq, diagnosis);
        st.error =
            make_error(errc::collective_failed,
                       root.empty() ? why : fmt::format("{} (the failing rank: {})", why, root));
        spdlog::info("driver: {}", st.error.message);
        for (const auto& s : plan.scheduled)
          st.sched->fail_request(s.request_id, why);
        fail_unfinished(st, fmt::format("not run: the tensor-parallel ranks stopped at step {} (a "
                                        "collective failed)",
                                        plan.seq));
        st.stepping = false;
        finish_run(self);
      });
}

void send_step(self_ptr self, step_plan plan, clock_type::time_point t0);

// Counts an executed step: its time and whether it replayed a graph.
void count_step(driver_state& st, const step_done& done, clock_type::time_point t0) {
  step_timeline::mark(done.seq, -1, step_point::driver_step_done);
  ++st.steps;
  st.step_ms.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
  if (st.setup.on_progress) st.events.step_s.push_back(st.step_ms.back() / 1e3);
  if (done.executed.mode == cudagraph_mode::none)
    ++st.eager_steps;
  else
    ++st.graph_replays;
}

// The latency events of the step's sampled tokens, for the next progress report: a first
// token's TTFT, and a finished request's TPOT and end-to-end latency.
void note_latencies(driver_state& st, const step_done& done) {
  for (const auto& s : done.sampled) {
    const request_timing t = st.latencies.timing(s.request_id);
    if (t.tokens == 1) st.events.ttft_s.push_back(t.ttft_s);
    const request_state* r = st.sched->find(s.request_id);
    if (r == nullptr || r->st != request_state::status::finished) continue;
    if (t.tokens > 1) st.events.tpot_s.push_back(t.tpot_s);
    st.events.e2e_s.push_back(t.e2e_s);
  }
}

// A sampled token's time; a request's first token ends its prefill, and only then do its prompt
// tokens count (vLLM's rule: work a failed or interrupted run never did is not counted).
void count_token(driver_state& st, uint64_t id, double now) {
  st.latencies.token(id, now);
  if (st.latencies.timing(id).tokens != 1) return;
  if (const request_state* r = st.sched->find(id))
    st.prompt_tokens += static_cast<int64_t>(r->prompt.size());
}

// Every rank executed the step: its tokens go to the scheduler. A reply the scheduler refuses (a
// rank answered for other requests) fails the step's requests with the reason: none is lost.
void apply_step(driver_state& st, const step_plan& plan, const step_verdict& v,
                clock_type::time_point t0) {
  for (auto id : v.failed)
    st.sched->fail_request(id, v.why);
  if (plan.scheduled.empty() || !v.done) return;
  if (auto ok = st.sched->apply(*v.done); !ok) {
    const auto why =
        fmt::format("step {}: the ranks' reply cannot be applied: {}", plan.seq, ok.err().message);
    spdlog::error("driver: {}", why);
    for (const auto& s : plan.scheduled)
      st.sched->fail_request(s.request_id, why);
  } else if (st.setup.on_tokens) {
    st.setup.on_tokens(v.done->sampled);
  }
  const double now = elapsed_s(st);
  for (const auto& s : v.done->sampled)
    count_token(st, s.request_id, now);
  if (st.setup.on_progress) note_latencies(st, *v.done);
  count_step(st, *v.done, t0);
}

// Every rank answered `plan` (and no collective failed): act on the verdict.
void on_step_answered(self_ptr self, const step_plan& plan, const step_verdict& v,
                      clock_type::time_point t0) {
  auto& st = self->state;
  if (!st.running) return; // the run ended meanwhile (a rank stopped): nothing more to do
  using action = step_verdict::action;
  if (v.what != action::apply) {
    spdlog::warn("driver: step {} rejected ({}); failing {} request(s)", plan.seq, v.why,
                 v.failed.size());
    for (auto id : v.failed)
      st.sched->fail_request(id, v.why);
    if (v.what == action::resend) {
      // Re-sent even when nothing is left to schedule: it still carries finished_requests.
      send_step(self, without(plan, v.failed), t0);
      return;
    }
    if (v.what == action::consumed) st.seq = plan.seq + 1;
    st.stepping = false;
    self->send(self, atom::step_v);
    return;
  }
  apply_step(st, plan, v, t0);
  st.seq = plan.seq + 1;
  st.stepping = false;
  report(st);
  if (!st.awaits.empty()) deliver_awaited(st);
  next_step(self); // directly: a message to itself would cost one more hop per step
}

} // namespace

// The step in flight: sent to every rank (again to those silent under --chaos) until each has
// answered, or the step timeout gives up on the silent ones.
struct step_flight {
  step_flight(step_plan p, clock_type::time_point t, size_t ranks)
      : message(caf::make_message(std::move(p))), plan(message.get_as<step_plan>(0)), t0(t),
        sent(clock_type::now()), replies(ranks) {}
  step_flight(const step_flight&) = delete; // `plan` refers into `message`
  step_flight& operator=(const step_flight&) = delete;
  const caf::message message;  // the plan, as the message every local rank shares (request_shared)
  const step_plan& plan;       // read through the message, never copied out of it
  clock_type::time_point t0;   // scheduled (the step's time counts from here)
  clock_type::time_point sent; // this plan first sent (a re-sent plan starts anew)
  step_replies replies;
  std::vector<bool> on_channel; // [routes]: sent on the route's step channel, not yet answered
};

namespace {

using flight_ptr = std::shared_ptr<step_flight>;

// Runs `fn` on the driver's thread after `delay` (atom::timer).
void after(self_ptr self, std::chrono::microseconds delay, std::function<void()> fn) {
  auto& st = self->state;
  const auto id = ++st.next_timer;
  st.timers.emplace(id, std::move(fn));
  self->delayed_send(self, delay, atom::timer_v, id);
}

void on_timer(self_ptr self, uint64_t id) {
  auto& st = self->state;
  auto it = st.timers.find(id);
  if (it == st.timers.end()) return; // injected, or already run
  auto fn = std::move(it->second);
  st.timers.erase(it);
  fn();
}

// What a --chaos link does to one message: `deliver` runs now, twice, later or never. Without
// --chaos it runs at once, as a plain call: the step's hot path holds no std::function.
template <class Deliver>
void through_link(self_ptr self, std::vector<chaos_link>& links, size_t i, Deliver deliver) {
  if (links.empty()) {
    deliver();
    return;
  }
  const auto d = links[i].next();
  switch (d.fault) {
  case link_fault::deliver: deliver(); return;
  case link_fault::drop: return;
  case link_fault::duplicate:
    after(self, d.delay, deliver); // the later copy first: `deliver` may move what it holds
    deliver();
    return;
  case link_fault::delay: after(self, d.delay, std::move(deliver)); return;
  }
}

std::string rank_name(size_t i) {
  return "rank[" + std::to_string(i) + "]";
}

void on_rank_done(self_ptr self, const flight_ptr& f, size_t i, step_done d) {
  if (auto& rec = self->state.setup.recorder) rec->record(rank_name(i), "driver", d);
  if (f->replies.on_done(static_cast<int32_t>(i), std::move(d)) && !f->replies.collective_failed())
    on_step_answered(self, f->plan, f->replies.verdict(f->plan), f->t0);
}

void on_rank_failure(self_ptr self, const flight_ptr& f, size_t i, error err,
                     std::vector<uint64_t> ids) {
  const auto rank = static_cast<int32_t>(i);
  if (auto& rec = self->state.setup.recorder)
    rec->record(rank_name(i), "driver", step_rejected{f->plan.seq, rank, err, ids});
  const bool last = f->replies.on_error(rank, std::move(err), std::move(ids));
  // A failed collective: the peers may never answer this step (one may be stuck), so the
  // diagnosis starts now instead of after every reply.
  if (f->replies.collective_failed_now()) {
    f->replies.close();
    // The diagnosis must see errors that arrive after close(): it holds the flight's live
    // replies (an aliasing pointer, which keeps the flight alive).
    stop_on_collective_failure(self, f->plan, std::shared_ptr<const step_replies>(f, &f->replies));
  }
  if (last && !f->replies.collective_failed())
    on_step_answered(self, f->plan, f->replies.verdict(f->plan), f->t0);
}

void on_rank_error(self_ptr self, const flight_ptr& f, size_t i, const caf::error& e) {
  on_rank_failure(self, f, i, from_caf_error(e), request_ids_of(e));
}

// The plan to rank i, in the message every rank shares (request_shared); its answer comes back
// through the link from the rank.
void request_step(self_ptr self, const flight_ptr& f, size_t i) {
  auto& st = self->state;
  if (st.setup.recorder) st.setup.recorder->record("driver", rank_name(i), f->plan);
  request_shared<step_plan>(self, st.setup.ranks[i], f->message)
      .then(
          [self, f, i](step_done& d) {
            through_link(self, self->state.from_rank, i, [self, f, i, d = std::move(d)]() mutable {
              on_rank_done(self, f, i, std::move(d));
            });
          },
          [self, f, i](caf::error& e) {
            through_link(self, self->state.from_rank, i,
                         [self, f, i, e = std::move(e)] { on_rank_error(self, f, i, e); });
          });
}

void send_to_rank(self_ptr self, const flight_ptr& f, size_t i) {
  through_link(self, self->state.to_rank, i, [self, f, i] { request_step(self, f, i); });
}

// Through the nodes (cluster mode, no --chaos), else to every rank itself.
bool relayed(const driver_state& st) {
  return !st.setup.routes.empty() && st.to_rank.empty();
}

bool settled(const driver_state& st, const step_flight& f) {
  return !st.running || f.replies.complete() || f.replies.closed();
}

// --chaos: the plan again to every rank that has not answered, until all have.
void resend_unanswered(self_ptr self, const flight_ptr& f) {
  auto& st = self->state;
  after(self, st.setup.deadlines.resend_after(st.step_ms), [self, f] {
    if (settled(self->state, *f)) return;
    for (auto r : f->replies.silent()) {
      ++self->state.steps_resent;
      send_to_rank(self, f, static_cast<size_t>(r));
    }
    resend_unanswered(self, f);
  });
}

// Rank r, with its location when it has one ("rank 1 on node 10.0.0.2:7400").
std::string describe_rank(const driver_state& st, int32_t r) {
  const auto i = static_cast<size_t>(r);
  if (i < st.setup.rank_locations.size() && !st.setup.rank_locations[i].empty())
    return fmt::format("rank {} on {}", r, st.setup.rank_locations[i]);
  return fmt::format("rank {}", r);
}

// The step timeout passed with ranks silent: the run ends naming them, every request reported.
void give_up_on_silent_ranks(self_ptr self, const flight_ptr& f) {
  auto& st = self->state;
  f->replies.close();
  std::vector<std::string> silent;
  for (auto r : f->replies.silent())
    silent.push_back(describe_rank(st, r));
  const auto why =
      fmt::format("step {}: {} did not answer within {:.1f} s (--step-timeout)", f->plan.seq,
                  fmt::join(silent, ", "),
                  std::chrono::duration<double>(st.setup.deadlines.step_timeout).count());
  spdlog::error("driver: {}", why);
  st.error = make_error(errc::rank_lost, why);
  for (const auto& s : f->plan.scheduled)
    st.sched->fail_request(s.request_id, why);
  fail_unfinished(st, fmt::format("not run: {}", why));
  st.stepping = false;
  finish_run(self);
}

// A node's answer for its ranks, entered rank by rank as if each had answered itself. Answers for
// ranks the node does not host for this run are ignored (they stay silent).
void on_node_done(self_ptr self, const flight_ptr& f, size_t n, node_step_done reply) {
  const auto& route = self->state.setup.routes[n];
  auto hosted = [&](int32_t r) {
    return std::find(route.ranks.begin(), route.ranks.end(), r) != route.ranks.end();
  };
  for (auto& d : reply.done)
    if (hosted(d.rank)) on_rank_done(self, f, static_cast<size_t>(d.rank), std::move(d));
  for (auto& r : reply.rejected)
    if (hosted(r.rank))
      on_rank_failure(self, f, static_cast<size_t>(r.rank), std::move(r.reason),
                      std::move(r.request_ids));
  if (!reply.silent.empty() && !settled(self->state, *f)) give_up_on_silent_ranks(self, f);
}

// Node n's step through the middleman: its one answer comes back for all of its ranks.
void request_node_step(self_ptr self, const flight_ptr& f, size_t n, node_step step) {
  self->request(self->state.setup.routes[n].node, caf::infinite, std::move(step))
      .then([self, f, n](node_step_done& d) { on_node_done(self, f, n, std::move(d)); },
            [self, f, n](caf::error& e) {
              // The node itself failed (it stopped, or refused the step): each of its ranks did.
              for (auto r : self->state.setup.routes[n].ranks)
                on_rank_error(self, f, static_cast<size_t>(r), e);
            });
}

node_step node_step_for(const driver_state& st, size_t n, std::vector<char> plan) {
  return node_step{std::move(plan), st.setup.routes[n].slots,
                   st.setup.deadlines.relay_answer_within().count()};
}

// One node_step to node n, for all the ranks it hosts: on its step channel when it has one open,
// else through the middleman.
void send_node_step(self_ptr self, const flight_ptr& f, size_t n, const std::vector<char>& plan) {
  auto& st = self->state;
  if (st.setup.recorder)
    for (auto r : st.setup.routes[n].ranks)
      st.setup.recorder->record("driver", rank_name(static_cast<size_t>(r)), f->plan);
  auto step = node_step_for(st, n, plan);
  if (auto& channel = st.setup.channel; channel && channel->open(n)) {
    if (auto sent = channel->send(n, f->plan.seq, step); sent) {
      f->on_channel[n] = true;
      return;
    } else {
      spdlog::warn("driver: route {}: step channel: {}; steps go through the middleman", n,
                   sent.err().message);
    }
  }
  request_node_step(self, f, n, std::move(step));
}

// A channel's answer to a step whose collective failed, arriving while the driver diagnoses it:
// its ranks' errors join those the diagnosis quotes from (the timed-out rank's may be among them).
void keep_late_failures(self_ptr self, const flight_ptr& f, size_t n, node_channel_event& e) {
  if (e.kind != channel_event_kind::answer || e.seq != f->plan.seq) return;
  if (!f->replies.collective_failed()) return;
  f->on_channel[n] = false;
  on_node_done(self, f, n, std::move(e.answer));
}

// What node n's step channel says about the step in flight. A lost channel's step goes again
// through the middleman, which answers it or reports the node's loss as before.
void on_channel_event(self_ptr self, node_channel_event& e) {
  step_timeline::mark(e.seq, e.route, step_point::driver_answer);
  auto& st = self->state;
  auto f = st.flight;
  const auto n = static_cast<size_t>(e.route);
  if (e.kind == channel_event_kind::lost)
    spdlog::warn("driver: route {}: step channel closed ({}); steps go through the middleman", n,
                 e.why.message);
  if (!f || n >= f->on_channel.size() || !f->on_channel[n]) return;
  if (settled(st, *f)) {
    keep_late_failures(self, f, n, e);
    return;
  }
  if (e.kind != channel_event_kind::lost && e.seq != f->plan.seq) return; // a step given up
  f->on_channel[n] = false;
  switch (e.kind) {
  case channel_event_kind::answer: on_node_done(self, f, n, std::move(e.answer)); return;
  case channel_event_kind::refusal:
    for (auto r : st.setup.routes[n].ranks)
      on_rank_failure(self, f, static_cast<size_t>(r), e.why, {});
    return;
  case channel_event_kind::lost:
    request_node_step(self, f, n, node_step_for(st, n, encode(f->plan)));
    return;
  }
}

// One pending check at a time: at the flight's deadline it gives up, or waits for the next one.
void arm_watchdog(self_ptr self, clock_type::time_point deadline) {
  auto& st = self->state;
  if (st.watchdog_armed) return;
  st.watchdog_armed = true;
  const auto wait = std::max(deadline - clock_type::now(), clock_type::duration::zero());
  after(self, std::chrono::duration_cast<std::chrono::microseconds>(wait), [self] {
    auto& st = self->state;
    st.watchdog_armed = false;
    auto f = st.flight;
    if (!f || settled(st, *f)) return; // the next step arms it again
    const auto due = f->sent + st.setup.deadlines.step_timeout;
    if (clock_type::now() >= due)
      give_up_on_silent_ranks(self, f);
    else
      arm_watchdog(self, due);
  });
}

// Sends `plan` to every rank and gathers their replies (step_replies).
void send_step(self_ptr self, step_plan plan, clock_type::time_point t0) {
  auto& st = self->state;
  auto f = std::make_shared<step_flight>(std::move(plan), t0, st.setup.ranks.size());
  step_timeline::mark(f->plan.seq, -1, step_point::driver_plan);
  st.flight = f;
  if (relayed(st)) {
    const auto plan = encode(f->plan); // once for every node
    f->on_channel.assign(st.setup.routes.size(), false);
    for (size_t n = 0; n < st.setup.routes.size(); ++n)
      send_node_step(self, f, n, plan);
  } else {
    for (size_t i = 0; i < st.setup.ranks.size(); ++i)
      send_to_rank(self, f, i);
  }
  const auto& deadlines = st.setup.deadlines;
  if (deadlines.step_timeout.count() > 0) arm_watchdog(self, f->sent + deadlines.step_timeout);
  if (deadlines.retransmit) resend_unanswered(self, f);
}

void next_step(self_ptr self) {
  auto& st = self->state;
  if (!st.running || st.stepping) return;
  const auto now_ns = static_cast<int64_t>(elapsed_s(st) * 1e9);
  while (st.next_arrival < st.pending.size() && st.pending[st.next_arrival].arrival_ns <= now_ns) {
    auto& r = st.pending[st.next_arrival++];
    st.latencies.arrived(r.request_id, static_cast<double>(r.arrival_ns) / 1e9);
    if (auto ok = st.sched->add_request(r.request_id, r.prompt, r.max_output_tokens, r.sampling);
        !ok)
      spdlog::warn("driver: request {} failed at admission: {}", r.request_id, ok.err().message);
  }
  if (!st.sched->has_work() && !st.sched->has_pending_finished()) {
    if (st.next_arrival < st.pending.size()) {
      auto wait = std::chrono::nanoseconds(st.pending[st.next_arrival].arrival_ns - now_ns);
      self->delayed_send(self, std::max(wait, std::chrono::nanoseconds(0)), atom::step_v);
      return;
    }
    finish_run(self);
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
    // Nothing can run now: wait for an arrival, or fail what can never run (not a hang).
    if (st.next_arrival < st.pending.size()) {
      self->delayed_send(self, std::chrono::milliseconds(1), atom::step_v);
      return;
    }
    for (auto id : st.sched->request_order()) {
      const auto* r = st.sched->find(id);
      if (r->st == request_state::status::waiting || r->st == request_state::status::running)
        st.sched->fail_request(id, "cannot be scheduled: the KV cache has too few blocks");
    }
    finish_run(self);
    return;
  }
  st.stepping = true;
  send_step(self, std::move(*plan), clock_type::now());
}

// A rank that stops (its node died or its link was cut) ends the run: every request not
// finished is reported failed with the reason, none is lost, nothing waits for it.
void on_rank_down(self_ptr self, const caf::down_msg& msg) {
  auto& st = self->state;
  std::string who = "a rank";
  for (size_t i = 0; i < st.setup.ranks.size(); ++i)
    if (msg.source == caf::actor_cast<caf::actor_addr>(st.setup.ranks[i]))
      who = describe_rank(st, static_cast<int32_t>(i));
  auto why = msg.reason == caf::exit_reason::remote_link_unreachable
                 ? fmt::format("{} is unreachable: its node died or the link to it was cut", who)
                 : fmt::format("{} stopped: {}", who, to_string(msg.reason));
  spdlog::error("driver: {}", why);
  if (st.starting.pending()) st.starting.deliver(to_caf_error(make_error(errc::rank_lost, why)));
  if (st.running) {
    st.error = make_error(errc::rank_lost, why);
    fail_unfinished(st, fmt::format("not run: {}", why));
    st.stepping = false;
    finish_run(self);
  } else if (st.error.code == errc::no_error) {
    st.error = make_error(errc::rank_lost, why); // between start and run: the run ends at once
  }
}

// The `submit` handler: queues `specs` by arrival time and answers with the number queued.
caf::result<int64_t> on_submit(self_ptr self, std::vector<request_spec>& specs) {
  auto& st = self->state;
  if (st.finished)
    return to_caf_error(make_error(errc::invalid_argument,
                                   "submit: the run has finished; nothing is "
                                   "admitted after it"));
  std::set<uint64_t> ids;
  for (const auto& s : st.pending)
    ids.insert(s.request_id);
  for (const auto& s : specs)
    if (!ids.insert(s.request_id).second)
      return to_caf_error(
          make_error(errc::invalid_argument,
                     fmt::format("submit: request_id {} is submitted twice", s.request_id)));
  // A live submission (injection) hears at once what the run would refuse; the run's own
  // workload is admitted as it arrives and a refused request is listed in the summary.
  if (st.running)
    for (const auto& s : specs)
      if (auto ok = st.sched->check_request(s.prompt, s.max_output_tokens, s.sampling); !ok)
        return to_caf_error(make_error(
            ok.err().code, fmt::format("submit: request {}: {}", s.request_id, ok.err().message)));
  // During a run (live injection) a request cannot arrive in the past: it arrives now, and
  // only the not yet admitted tail of the queue is reordered.
  const auto now_ns = st.running ? static_cast<int64_t>(elapsed_s(st) * 1e9) : 0;
  for (auto& s : specs) {
    s.arrival_ns = std::max(s.arrival_ns, now_ns);
    st.pending.push_back(std::move(s));
  }
  std::stable_sort(st.pending.begin() + static_cast<std::ptrdiff_t>(st.next_arrival),
                   st.pending.end(),
                   [](const auto& a, const auto& b) { return a.arrival_ns < b.arrival_ns; });
  if (st.running) next_step(self); // wakes an idle driver; a stepping one ignores it
  return static_cast<int64_t>(st.pending.size());
}

// The `run` handler: starts the step loop and answers with the summary once the run ends.
caf::result<run_summary> on_run(self_ptr self) {
  auto& st = self->state;
  if (st.finished)
    return to_caf_error(make_error(errc::invalid_argument,
                                   "run: this driver has finished its run; spawn a new one"));
  if (!st.sched) return to_caf_error(make_error(errc::invalid_argument, "run: send start first"));
  if (st.running) return to_caf_error(make_error(errc::invalid_argument, "run: already running"));
  st.running = true;
  st.started = clock_type::now();
  st.done = self->make_response_promise<run_summary>();
  if (st.error.code != errc::no_error) { // a rank stopped before the run began
    fail_unfinished(st, fmt::format("not run: {}", st.error.message));
    finish_run(self);
    return st.done;
  }
  if (!st.drain.empty()) { // told to stop while starting
    fail_unfinished(st, st.drain);
    finish_run(self);
    return st.done;
  }
  next_step(self);
  return st.done;
}

// The `request_await` handler: the result now if the request is done, else once it is.
caf::result<request_result> on_await(self_ptr self, const request_await& a) {
  auto& st = self->state;
  const bool submitted = std::any_of(st.pending.begin(), st.pending.end(),
                                     [&](const auto& s) { return s.request_id == a.request_id; });
  if (!submitted)
    return to_caf_error(
        make_error(errc::invalid_argument,
                   fmt::format("request_await: request_id {} was never submitted", a.request_id)));
  if (const request_state* r = st.sched ? st.sched->find(a.request_id) : nullptr)
    if (is_done(*r)) return result_of(*r);
  auto rp = self->make_response_promise<request_result>();
  st.awaits.emplace(a.request_id, rp);
  return rp;
}

// The `drain` handler: the run ends now, every unfinished request failed with `why`. A step in
// flight is not waited for (a stalled rank must not hold the summary back); its late answer finds
// the run over and is dropped.
void on_drain(self_ptr self, std::string why) {
  auto& st = self->state;
  if (st.finished || !st.drain.empty()) return;
  st.drain = std::move(why);
  spdlog::info("driver: draining: {}", st.drain);
  if (!st.running) return; // on_run ends it at once
  fail_unfinished(st, st.drain);
  st.stepping = false;
  finish_run(self);
}

} // namespace

std::string output_digest(const std::vector<request_result>& results) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (const auto& r : results) {
    mix(r.request_id);
    mix(r.output.size());
    for (auto t : r.output)
      mix(static_cast<uint32_t>(t));
  }
  return fmt::format("{:016x}", h);
}

driver_actor::behavior_type driver(driver_actor::stateful_pointer<driver_state> self,
                                   driver_setup setup) {
  refuse_unexpected(self);
  self->state.setup = std::move(setup);
  if (const auto& chaos = self->state.setup.chaos) {
    const auto n = self->state.setup.ranks.size();
    for (size_t i = 0; i < n; ++i) {
      self->state.to_rank.emplace_back(*chaos, 2 * i);
      self->state.from_rank.emplace_back(*chaos, 2 * i + 1);
    }
  }
  for (const auto& r : self->state.setup.ranks)
    self->monitor(r);
  self->set_down_handler([self](const caf::down_msg& msg) { on_rank_down(self, msg); });
  return {
      [self](atom::start) -> caf::result<std::vector<rank_ready>> {
        return driver_detail::start_ranks(self);
      },
      [self](atom::submit, std::vector<request_spec>& specs) -> caf::result<int64_t> {
        return on_submit(self, specs);
      },
      [self](atom::run) -> caf::result<run_summary> { return on_run(self); },
      [self](atom::step) { next_step(self); },
      [self](atom::timer, uint64_t id) { on_timer(self, id); },
      [self](node_channel_event& e) { on_channel_event(self, e); },
      [self](atom::drain, std::string& why) { on_drain(self, std::move(why)); },
      [self](const request_await& a) -> caf::result<request_result> { return on_await(self, a); },
  };
}

} // namespace kvactor
