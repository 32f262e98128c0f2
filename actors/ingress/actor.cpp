#include "actors/ingress/actor.hpp"

#include <chrono>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/unexpected.hpp"
#include "messages/caf_error.hpp"

namespace kvactor {

namespace {

using ingress_self = ingress_actor::stateful_pointer<ingress_state>;

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
      },
      [self](atom::wake) {
        if (self->state.core) take_inbox(self); // before start nothing is served yet
      },
      [self](atom::start, caf::actor& drv, int32_t vocab_size) {
        if (self->state.core) return;
        self->state.setup.driver = caf::actor_cast<driver_actor>(drv);
        self->state.setup.model.vocab_size = vocab_size;
        make_core(self);
        take_inbox(self);
      },
      [self](atom::drain, std::string& why) {
        if (!self->state.core) return;
        self->state.core->drain();
        if (!why.empty()) self->state.core->fail_all(why);
      },
  };
}

} // namespace kvactor
