#include "actors/driver/actor.hpp"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/driver/driver_parts.hpp"
#include "actors/driver/fabric/make_fabric.hpp"
#include "actors/unexpected.hpp"
#include "messages/caf_error.hpp"

namespace kvactor::driver_detail {

namespace {

delivery_counts delivery_of(const driver_state& st) {
  return {st.fabric->faults(), st.fabric->steps_resent()};
}

} // namespace

void report(driver_state& st) {
  if (!st.setup.on_progress) return;
  st.setup.on_progress(st.stats.progress(*st.sched, st.end, st.arrivals.size(), delivery_of(st)));
}

void deliver_awaited(driver_state& st) {
  auto& awaits = st.owed.awaits;
  for (auto it = awaits.begin(); it != awaits.end();) {
    const request_state* r = st.sched ? st.sched->find(it->first) : nullptr;
    if (r == nullptr || !is_done(*r)) {
      ++it;
      continue;
    }
    it->second.deliver(result_of(*r));
    it = awaits.erase(it);
  }
}

namespace {

// The outputs sink's update of each request the event touched: its tokens, then its end.
request_updates updates_of(const scheduler& sched, const std::vector<sampled_token>& sampled,
                           const std::vector<uint64_t>& ended) {
  request_updates out;
  std::unordered_map<uint64_t, size_t> at;
  auto update_of = [&](uint64_t id) -> request_update& {
    auto [it, fresh] = at.emplace(id, out.updates.size());
    if (fresh) out.updates.push_back({id});
    return out.updates[it->second];
  };
  for (const auto& s : sampled) {
    const request_state* r = sched.find(s.request_id);
    if (r == nullptr || r->st == request_state::status::failed) continue; // not applied
    auto& u = update_of(s.request_id);
    u.tokens.push_back(s.token);
    if (r->sampling.logprobs >= 0) u.logprobs.push_back(s.logprobs);
  }
  for (auto id : ended)
    if (const request_state* r = sched.find(id)) {
      auto& u = update_of(id);
      u.done = true;
      u.finished = r->st == request_state::status::finished;
      u.reason = r->reason;
      u.failure = r->failure;
    }
  return out;
}

} // namespace

void settle(driver_state& st, const std::vector<sampled_token>& sampled) {
  const auto ended = st.sched->take_retired();
  if (st.setup.outputs) {
    auto updates = updates_of(*st.sched, sampled, ended);
    if (!updates.updates.empty()) caf::anon_send(st.setup.outputs, std::move(updates));
  }
  if (!st.owed.awaits.empty()) deliver_awaited(st);
  if (!st.setup.keep_serving) return;
  for (auto id : ended) // a long-lived server keeps nothing per request it has answered
    if (st.owed.awaits.count(id) == 0) {
      st.sched->forget(id);
      st.arrivals.forget(id);
      st.stats.latencies().retire(id);
    }
}

void finish_run(driver_self self) {
  auto& st = self->state;
  st.phase = driver_phase::finished;
  settle(st);
  auto s = st.stats.summarize(*st.sched, st.end);
  report(st);
  spdlog::info("driver: {} finished, {} failed, {} steps in {:.2f} s", s.finished, s.failed,
               s.steps, s.wall_s);
  if (st.setup.chaos) {
    const auto c = st.fabric->faults();
    spdlog::warn("driver: --chaos: {} messages, {} lost, {} repeated, {} late; {} step copies "
                 "re-sent",
                 c.messages, c.dropped, c.duplicated, c.delayed, st.fabric->steps_resent());
  }
  st.owed.run.deliver(std::move(s));
}

void fail_unfinished(driver_state& st, const std::string& why) {
  st.arrivals.admit_all(*st.sched);
  for (auto id : st.sched->request_order()) {
    const auto* r = st.sched->find(id);
    if (r->st == request_state::status::waiting || r->st == request_state::status::running)
      st.sched->fail_request(id, why);
  }
}

void end_run(driver_self self, error err, const step_plan* plan, const std::string& why,
             const std::string& rest) {
  auto& st = self->state;
  st.end.error = std::move(err);
  if (plan != nullptr)
    for (const auto& s : plan->scheduled)
      st.sched->fail_request(s.request_id, why);
  fail_unfinished(st, rest);
  finish_run(self);
}

std::string describe_rank(const driver_state& st, int32_t r) {
  const auto i = static_cast<size_t>(r);
  if (i < st.setup.rank_locations.size() && !st.setup.rank_locations[i].empty())
    return fmt::format("rank {} on {}", r, st.setup.rank_locations[i]);
  return fmt::format("rank {}", r);
}

namespace {

// A rank that stops (its node died or its link was cut) ends the run: every request not
// finished is reported failed with the reason, none is lost, nothing waits for it.
void on_rank_down(driver_self self, const caf::down_msg& msg) {
  auto& st = self->state;
  std::string who = "a rank";
  for (size_t i = 0; i < st.setup.ranks.size(); ++i)
    if (msg.source == caf::actor_cast<caf::actor_addr>(st.setup.ranks[i]))
      who = describe_rank(st, static_cast<int32_t>(i));
  auto why = msg.reason == caf::exit_reason::remote_link_unreachable
                 ? fmt::format("{} is unreachable: its node died or the link to it was cut", who)
                 : fmt::format("{} stopped: {}", who, to_string(msg.reason));
  spdlog::error("driver: {}", why);
  if (st.phase == driver_phase::starting) {
    st.owed.start.deliver(to_caf_error(make_error(errc::rank_lost, why)));
    st.phase = driver_phase::created;
  }
  if (running(st))
    end_run(self, make_error(errc::rank_lost, why), nullptr, why, fmt::format("not run: {}", why));
  else if (st.end.error.code == errc::no_error)
    st.end.error = make_error(errc::rank_lost, why); // between start and run: the run ends at once
}

// The `submit` handler: queues `specs` by arrival time and answers with the number queued.
caf::result<int64_t> on_submit(driver_self self, std::vector<request_spec>& specs) {
  auto& st = self->state;
  if (st.phase == driver_phase::finished)
    return to_caf_error(make_error(errc::invalid_argument,
                                   "submit: the run has finished; nothing is admitted after it"));
  // A live submission (injection) hears at once what the run would refuse; the run's own
  // workload is admitted as it arrives and a refused request is listed in the summary.
  if (running(st))
    for (const auto& s : specs)
      if (auto ok = st.sched->check_request(s.prompt, s.max_output_tokens, s.sampling); !ok)
        return to_caf_error(make_error(
            ok.err().code, fmt::format("submit: request {}: {}", s.request_id, ok.err().message)));
  const auto now_ns = running(st) ? static_cast<int64_t>(st.stats.elapsed_s() * 1e9) : 0;
  auto queued = st.arrivals.submit(std::move(specs), now_ns);
  if (!queued) return to_caf_error(queued.err());
  next_step(self); // wakes an idle driver; any other phase ignores it
  return *queued;
}

// The `run` handler: starts the step loop and answers with the summary once the run ends.
caf::result<run_summary> on_run(driver_self self) {
  auto& st = self->state;
  switch (st.phase) {
  case driver_phase::finished:
    return to_caf_error(make_error(errc::invalid_argument,
                                   "run: this driver has finished its run; spawn a new one"));
  case driver_phase::created:
  case driver_phase::starting:
    return to_caf_error(make_error(errc::invalid_argument, "run: send start first"));
  case driver_phase::idle:
  case driver_phase::stepping:
    return to_caf_error(make_error(errc::invalid_argument, "run: already running"));
  case driver_phase::ready: break;
  }
  st.phase = driver_phase::idle;
  st.stats.start();
  st.owed.run = self->make_response_promise<run_summary>();
  if (st.end.error.code != errc::no_error) { // a rank stopped before the run began
    fail_unfinished(st, fmt::format("not run: {}", st.end.error.message));
    finish_run(self);
  } else if (!st.end.drain.empty()) { // told to stop while starting
    fail_unfinished(st, st.end.drain);
    finish_run(self);
  } else {
    next_step(self);
  }
  return st.owed.run;
}

// The `request_await` handler: the result now if the request is done, else once it is.
caf::result<request_result> on_await(driver_self self, const request_await& a) {
  auto& st = self->state;
  if (!st.arrivals.submitted(a.request_id))
    return to_caf_error(
        make_error(errc::invalid_argument,
                   fmt::format("request_await: request_id {} was never submitted", a.request_id)));
  if (const request_state* r = st.sched ? st.sched->find(a.request_id) : nullptr)
    if (is_done(*r)) return result_of(*r);
  auto rp = self->make_response_promise<request_result>();
  st.owed.awaits.emplace(a.request_id, rp);
  return rp;
}

// The `request_abort` handler: the request fails now and its blocks are free for the next step;
// an idle driver tells the ranks at once.
void on_abort(driver_self self, const request_abort& a) {
  auto& st = self->state;
  if (!st.sched || st.phase == driver_phase::finished) return; // nothing admitted, or all over
  st.arrivals.admit_now(a.request_id, *st.sched);
  st.sched->fail_request(a.request_id, a.reason.empty() ? "aborted" : a.reason);
  settle(st);
  next_step(self);
}

// The `drain` handler: the run ends now, every unfinished request failed with `why`. A step in
// flight is not waited for (a stalled rank must not hold the summary back); its late answer finds
// the run over and is dropped.
void on_drain(driver_self self, std::string why) {
  auto& st = self->state;
  if (st.phase == driver_phase::finished || !st.end.drain.empty()) return;
  st.end.drain = std::move(why);
  spdlog::info("driver: draining: {}", st.end.drain);
  if (!running(st)) return; // on_run ends it at once
  fail_unfinished(st, st.end.drain);
  finish_run(self);
}

} // namespace

} // namespace kvactor::driver_detail

namespace kvactor {

driver_actor::behavior_type driver(driver_actor::stateful_pointer<driver_state> self,
                                   driver_setup setup) {
  using namespace driver_detail;
  refuse_unexpected(self);
  auto& st = self->state;
  st.setup = std::move(setup);
  st.stats = run_stats(static_cast<bool>(st.setup.on_progress));
  st.host = std::make_unique<driver_host>(self);
  st.fabric = make_rank_fabric(*st.host, st.setup);
  for (const auto& r : st.setup.ranks)
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
      [self](atom::timer, uint64_t id) { self->state.host->fire(id); },
      [self](node_channel_event& e) { self->state.fabric->on_channel_event(e); },
      [self](atom::drain, std::string& why) { on_drain(self, std::move(why)); },
      [self](const request_await& a) -> caf::result<request_result> { return on_await(self, a); },
      [self](const request_abort& a) { on_abort(self, a); },
  };
}

} // namespace kvactor
