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

// The inbox, oldest first.
void take_inbox(ingress_self self) {
  for (auto& e : self->state.inbox->take_all()) {
    if (auto* call = std::get_if<ingress_call>(&e)) {
      take_call(self, *call);
      continue;
    }
    const auto& gone = std::get<ingress_disconnect>(e);
    abort_all(self, self->state.core->disconnect(gone.from.get()), "the client disconnected");
  }
}

} // namespace

ingress_actor::behavior_type ingress(ingress_actor::stateful_pointer<ingress_state> self,
                                     ingress_setup setup) {
  refuse_unexpected(self);
  auto& st = self->state;
  const auto now = [] {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  st.core =
      std::make_unique<openai::ingress_core>(std::move(setup.model), setup.limits, now, setup.seed);
  st.driver = std::move(setup.driver);
  st.inbox = std::move(setup.inbox);
  return {
      [self](request_updates& u) {
        abort_all(self, self->state.core->on_updates(u),
                  "answered: a stop string ended it, or a sibling choice failed");
      },
      [self](atom::wake) { take_inbox(self); },
      [self](atom::drain, std::string& why) {
        self->state.core->drain();
        if (!why.empty()) self->state.core->fail_all(why);
      },
  };
}

} // namespace kvactor
