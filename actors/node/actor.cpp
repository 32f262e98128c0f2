#include "actors/node/actor.hpp"

#include <algorithm>
#include <functional>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/node/step_relay.hpp"
#include "actors/rank/actor.hpp"
#include "actors/shared_request.hpp"
#include "actors/step_timeline.hpp"
#include "actors/unexpected.hpp"
#include "kvactor/kernels/device_runtime.h"
#include "messages/caf_error.hpp"
#include "messages/codec.hpp"

namespace kvactor {

void joined_communicators::abort_all(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu);
  for (auto& w : all)
    if (auto c = w.lock()) c->abort(why);
  all.clear();
}

namespace {

// The counts --metrics-port shows, after a rank started (or stopped).
void count_ranks(node_state& st, bool started) {
  if (!st.setup.counts) return;
  st.setup.counts->hosted = static_cast<int32_t>(st.ranks.size());
  ++(started ? st.setup.counts->started : st.setup.counts->stopped);
}

// A spawn request's rank and timeout, before a slot is claimed for it.
status check_spawn(const rank_spawn& req) {
  if (req.world < 1 || req.rank < 0 || req.rank >= req.world)
    return make_error(
        errc::invalid_argument,
        fmt::format("spawn: rank {} of world {} is not a rank of the group", req.rank, req.world));
  if (req.collective_timeout_ms <= 0)
    return make_error(
        errc::invalid_argument,
        fmt::format("spawn: collective_timeout_ms {} is not positive", req.collective_timeout_ms));
  return ok();
}

using node_self = node_actor::stateful_pointer<node_state>;

caf::result<node_info> hello(node_self self, uint32_t protocol, uint32_t schema,
                             const std::string& build) {
  auto& st = self->state;
  if (auto ok = check_peer(st.setup.info, protocol, schema, build); !ok) {
    spdlog::warn("node: refused a driver: {}", ok.err().message);
    return to_caf_error(ok.err());
  }
  auto info = st.setup.info;
  info.busy = st.slots->busy();
  if (info.device == device_kind::cuda)
    if (auto mem = kernels::gpu_memory_info()) {
      info.gpu_free_bytes = mem->first;
      info.gpu_total_bytes = mem->second;
    }
  return info;
}

// The runtime of a rank on `slot`: NCCL on GPU nodes, sockets on CPU nodes.
rank_runtime runtime_for(node_state& st, const rank_spawn& req) {
  rank_runtime rt;
  rt.collective_timeout = std::chrono::milliseconds(req.collective_timeout_ms);
  rt.device_index = req.slot < static_cast<int32_t>(st.setup.gpus.size())
                        ? st.setup.gpus[static_cast<size_t>(req.slot)]
                        : req.slot;
  if (st.setup.info.device == device_kind::cuda)
    rt.nccl = true;
  else
    rt.socket_host = st.setup.socket_host;
  rt.on_join = [comms = st.comms](std::shared_ptr<comm::communicator> c) {
    std::lock_guard<std::mutex> lock(comms->mu);
    comms->all.push_back(c);
  };
  return rt;
}

caf::result<caf::strong_actor_ptr> spawn_rank(node_self self, const rank_spawn& req) {
  auto& st = self->state;
  if (auto ok = check_spawn(req); !ok) return to_caf_error(ok.err());
  if (auto ok = st.slots->claim(req.slot); !ok) return to_caf_error(ok.err());
  auto rt = runtime_for(st, req);
  // A node's only CPU rank is event-based: a message to a detached actor costs a thread
  // wake-up, two per step. Where several may share the node they are detached, as local mode's
  // groups are: CAF puts the node actor's requests at the head of its own worker's queue and
  // wakes no other, so one rank would wait for the other's step (2 x 2 on 16 cores: the step
  // 16.6 us faster detached, bench/RESULTS.md). An event-based rank may still block a scheduler
  // thread in a collective; the node runs at least slots + 2 threads (node_command.cpp).
  const bool detached = st.setup.info.device == device_kind::cuda || st.setup.info.slots > 1;
  auto r = detached ? self->system().spawn<caf::detached>(rank_with, rt)
                    : self->system().spawn(rank_with, rt);
  self->monitor(r);
  st.ranks[req.slot] = hosted_rank{req.rank, r};
  count_ranks(st, true);
  spdlog::info("node: rank {} of {} on slot {}", req.rank, req.world, req.slot);
  return caf::actor_cast<caf::strong_actor_ptr>(r);
}

int32_t release_ranks(node_self self) {
  auto& st = self->state;
  const auto n = static_cast<int32_t>(st.ranks.size());
  st.comms->abort_all("released by the node: the driver ended the run");
  for (const auto& [slot, hosted] : st.ranks)
    self->send_exit(hosted.handle, caf::exit_reason::user_shutdown);
  // Slots free as their ranks' down messages arrive.
  return n;
}

// Called once with the gathered answer of a relayed step.
using relay_done = std::function<void(node_step_done)>;

// Hands the plan to one rank; its answer goes into the relay, which says when `done` is due. Every
// rank gets the same message, shared (request_shared). The request has no timeout of its own: the
// node's watchdog reports the silent ranks (relay_watch). A rank that never answers keeps the
// request's handler until the rank stops (the run then ends: a silent rank fails its step).
void relay_to(node_self self, const hosted_rank& h, const caf::message& plan,
              const std::shared_ptr<step_relay>& relay, const std::shared_ptr<relay_done>& done) {
  request_shared<step_plan>(self, h.handle, plan)
      .then(
          [relay, done, rank = h.rank](step_done& d) {
            if (relay->on_done(rank, std::move(d))) (*done)(relay->take());
          },
          [relay, done, rank = h.rank](caf::error& e) {
            if (relay->on_error(rank, from_caf_error(e), request_ids_of(e))) (*done)(relay->take());
          });
}

// The watchdog fires at `at` unless it fires earlier already: one timer for many steps. Each
// timer has a number; arming an earlier one supersedes the armed one.
void arm_watch(node_self self, relay_watch::clock::time_point at) {
  auto& st = self->state;
  if (st.watch_armed && *st.watch_armed <= at) return;
  st.watch_armed = at;
  const auto wait = std::max(at - relay_watch::clock::now(), relay_watch::clock::duration::zero());
  self->delayed_send(self, std::chrono::ceil<std::chrono::microseconds>(wait), atom::timer_v,
                     ++st.watch_timer);
}

// The watchdog: the relays past their deadline answer with their silent ranks; then it waits for
// the next deadline (at once again if this timer came a moment early).
void on_watch_timer(node_self self, uint64_t timer) {
  auto& st = self->state;
  if (timer != st.watch_timer) return; // superseded by an earlier one
  st.watch_armed.reset();
  st.watch.expire(relay_watch::clock::now());
  if (auto next = st.watch.next()) arm_watch(self, *next);
}

// A node_step the node can relay: its plan, and the ranks on its slots.
struct relay_plan {
  uint64_t seq = 0;
  caf::message plan; // one step_plan, shared by the ranks
  std::vector<hosted_rank> hosts;
  std::optional<std::chrono::milliseconds> within; // none: no deadline
};

expected<relay_plan> prepare_relay(node_state& st, const node_step& step) {
  auto plan = decode<step_plan>(step.plan);
  if (!plan)
    return make_error(plan.err().code, fmt::format("node_step: plan: {}", plan.err().message));
  relay_plan out{plan->seq, caf::make_message(std::move(*plan)), {}, std::nullopt};
  for (auto slot : step.slots) {
    auto it = st.ranks.find(slot);
    if (it == st.ranks.end())
      return make_error(errc::invalid_argument,
                        fmt::format("node_step: slot {} hosts no rank", slot));
    out.hosts.push_back(it->second);
  }
  if (step.answer_within_ms > 0) out.within = std::chrono::milliseconds(step.answer_within_ms);
  return out;
}

// The plan to each rank on the step's slots; `done` gets their answers in one message, at the
// latest when `within` is up (the ranks that have not answered then are silent).
void run_relay(node_self self, const relay_plan& r, relay_done done) {
  std::vector<int32_t> ranks;
  for (const auto& h : r.hosts)
    ranks.push_back(h.rank);
  auto relay = std::make_shared<step_relay>(r.seq, std::move(ranks));
  if (r.hosts.empty()) return done(relay->take());
  auto shared_done = std::make_shared<relay_done>(std::move(done));
  for (const auto& h : r.hosts)
    relay_to(self, h, r.plan, relay, shared_done);
  if (!r.within) return;
  const auto deadline = relay_watch::clock::now() + *r.within;
  self->state.watch.add(deadline, relay,
                        [shared_done](node_step_done d) { (*shared_done)(std::move(d)); });
  arm_watch(self, deadline);
}

// node_step through the middleman: the answer is the response.
caf::result<node_step_done> relay_step(node_self self, const node_step& step) {
  auto prepared = prepare_relay(self->state, step);
  if (!prepared) return to_caf_error(prepared.err());
  auto rp = self->make_response_promise<node_step_done>();
  run_relay(self, *prepared, [rp](node_step_done d) mutable { rp.deliver(std::move(d)); });
  return rp;
}

// A step from step channel `channel`: the answer goes to its sink from this thread.
void relay_channel_step(node_self self, uint64_t channel, uint64_t seq, const node_step& step) {
  const auto& sinks = self->state.setup.sinks;
  auto sink = sinks ? sinks->find(channel) : nullptr;
  if (!sink) return; // the channel closed meanwhile: the driver takes the middleman
  step_timeline::mark(seq, -1, step_point::node_relay);
  auto prepared = prepare_relay(self->state, step);
  if (!prepared) return sink->refuse(seq, prepared.err());
  run_relay(self, *prepared, [sink](node_step_done d) {
    step_timeline::mark(d.seq, -1, step_point::node_gathered);
    sink->answer(d);
  });
}

void forget_rank(node_state& st, const caf::down_msg& msg) {
  auto it = std::find_if(st.ranks.begin(), st.ranks.end(), [&](const auto& entry) {
    return caf::actor_cast<caf::actor_addr>(entry.second.handle) == msg.source;
  });
  if (it == st.ranks.end()) return;
  spdlog::info("node: rank on slot {} stopped ({})", it->first, to_string(msg.reason));
  st.slots->free(it->first);
  st.ranks.erase(it);
  count_ranks(st, false);
}

} // namespace

node_actor::behavior_type node(node_self self, node_setup setup) {
  refuse_unexpected(self);
  auto& st = self->state;
  st.setup = std::move(setup);
  if (!st.setup.build_override.empty()) st.setup.info.build = st.setup.build_override;
  st.slots = std::make_unique<node_slots>(st.setup.info.slots);
  self->set_down_handler([self](const caf::down_msg& msg) { forget_rank(self->state, msg); });
  return {
      [self](atom::hello, uint32_t protocol, uint32_t schema, const std::string& build)
          -> caf::result<node_info> { return hello(self, protocol, schema, build); },
      [self](atom::spawn, const rank_spawn& req) -> caf::result<caf::strong_actor_ptr> {
        return spawn_rank(self, req);
      },
      [self](atom::release) -> int32_t {
        if (auto written = step_timeline::flush(); !written)
          spdlog::warn("node: {}", written.err().message);
        return release_ranks(self);
      },
      [self](const node_step& step) -> caf::result<node_step_done> {
        return relay_step(self, step);
      },
      [self](atom::relay, uint64_t channel, uint64_t seq, const node_step& step) {
        relay_channel_step(self, channel, seq, step);
      },
      [self](atom::timer, uint64_t timer) { on_watch_timer(self, timer); },
  };
}

} // namespace kvactor
