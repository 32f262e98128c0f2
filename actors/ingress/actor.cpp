#include "actors/ingress/actor.hpp"

#include <chrono>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/unexpected.hpp"
#include "messages/caf_error.hpp"

namespace kvactor {

namespace {

using ingress_self = ingress_actor::stateful_pointer<ingress_state>;

void settle(ingress_self self);

void abort_all(ingress_self self, const std::vector<uint64_t>& ids, const char* why) {
  for (auto id : ids)
    self->send(self->state.driver, request_abort{id, why});
}

// A call's engine requests go to the driver; one it refuses fails its client with the reason.
void take_call(ingress_self self, ingress_call& call) {
  auto& st = self->state;
  uint64_t key = 0;
  auto specs = st.core->accept(call.kind, call.body, std::move(call.to), key);
  if (specs.empty()) return; // answered already
  self->request(st.driver, caf::infinite, atom::submit_v, std::move(specs))
      .then([](int64_t) {},
            [self, key](const caf::error& err) {
              const auto why = from_caf_error(err).message;
              spdlog::error("ingress: the driver refused a request: {}", why);
              self->state.core->fail(key, why);
              settle(self);
            });
}

// One entry of the inbox.
void take_entry(ingress_self self, ingress_entry& e) {
  if (auto* call = std::get_if<ingress_call>(&e)) {
    auto to = call->to;
    try {
      take_call(self, *call);
    } catch (const std::exception& ex) {
      // One request's failure must not take the server down with it.
      spdlog::error("ingress: a request failed: {}", ex.what());
      self->state.core->disconnect(to.get());
      to->respond(500, openai::api_error{500, ex.what(), "InternalServerError", "", ""}.body());
    }
    return;
  }
  const auto& gone = std::get<ingress_disconnect>(e);
  abort_all(self, self->state.core->disconnect(gone.from.get()), "the client disconnected");
}

// The inbox, oldest first.
void take_inbox(ingress_self self) {
  for (auto& e : self->state.inbox->take_all())
    take_entry(self, e);
}

// The core, once the driver is known.
void make_core(ingress_self self) {
  auto& st = self->state;
  const auto now = [] {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  st.driver = st.setup.driver;
  st.core = std::make_unique<openai::ingress_core>(std::move(st.setup.model), st.setup.limits, now,
                                                   st.setup.seed);
}

// The driver stops once the ingress has nothing more for it (once).
void drain_driver(ingress_self self, const std::string& why) {
  auto& st = self->state;
  if (st.driver_drained) return;
  st.driver_drained = true;
  spdlog::info("ingress: the engine stops: {}", why);
  self->send(st.driver, atom::drain_v, why);
}

// After each message: the counts for /metrics; a drain ends once nothing is in flight.
void settle(ingress_self self) {
  auto& st = self->state;
  if (!st.core) return;
  if (st.setup.board) st.setup.board->publish(st.core->counts());
  if (!st.drain_why.empty() && st.core->in_flight() == 0)
    drain_driver(self, "the server is shutting down");
}

void begin_drain(ingress_self self, caf::timespan grace, std::string why) {
  auto& st = self->state;
  if (!st.core || !st.drain_why.empty()) return;
  take_inbox(self); // calls queued before the signal are served, not refused
  st.drain_why = why.empty() ? std::string{"the server is shutting down"} : std::move(why);
  st.core->drain();
  spdlog::info("ingress: draining: new requests get 503; {} in flight may finish",
               st.core->in_flight());
  if (st.core->in_flight() > 0) self->delayed_send(self, grace, atom::timer_v);
  settle(self);
}

// The grace period is over: the driver fails what it still runs, and every client left is told.
void end_grace(ingress_self self) {
  auto& st = self->state;
  if (!st.core || st.driver_drained) return;
  drain_driver(self, st.drain_why);
  st.core->fail_all(st.drain_why);
  settle(self);
}

} // namespace

ingress_actor::behavior_type ingress(ingress_actor::stateful_pointer<ingress_state> self,
                                     ingress_setup setup) {
  refuse_unexpected(self);
  auto& st = self->state;
  st.inbox = setup.inbox;
  st.setup = std::move(setup);
  if (st.setup.driver) make_core(self);
  return {
      [self](request_updates& u) {
        if (!self->state.core) return;
        abort_all(self, self->state.core->on_updates(u),
                  "answered: a stop string ended it, or a sibling choice failed");
        settle(self);
      },
      [self](atom::wake) {
        if (!self->state.core) return; // before start nothing is served yet
        take_inbox(self);
        settle(self);
      },
      [self](atom::start, caf::actor& drv, int32_t vocab_size) {
        if (self->state.core) return;
        self->state.setup.driver = caf::actor_cast<driver_actor>(drv);
        self->state.setup.model.vocab_size = vocab_size;
        make_core(self);
        take_inbox(self);
        settle(self);
      },
      [self](atom::drain, caf::timespan grace, std::string& why) {
        begin_drain(self, grace, std::move(why));
      },
      [self](atom::timer) { end_grace(self); },
      [self](atom::stats) -> int64_t {
        return self->state.core ? static_cast<int64_t>(self->state.core->in_flight()) : 0;
      },
  };
}

} // namespace kvactor
