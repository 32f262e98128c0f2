#include "actors/chaos/actor.hpp"

#include <caf/all.hpp>

#include "messages/type_ids.hpp"

namespace kvactor {

namespace {

using relay_ptr = caf::stateful_actor<chaos_relay_state>*;

caf::result<caf::message> relay(relay_ptr self, caf::message_view& x) {
  auto& st = self->state;
  auto rp = self->make_response_promise();
  auto msg = x.move_content_to_message();
  const auto d = st.link->next();
  if (d.fault == link_fault::deliver) {
    rp.delegate(st.target, std::move(msg));
    return rp;
  }
  const auto id = ++st.next_id;
  st.held.emplace(id, std::pair{rp, std::move(msg)});
  self->delayed_send(self, d.delay, atom::timer_v, id);
  return rp;
}

} // namespace

caf::behavior chaos_relay(caf::stateful_actor<chaos_relay_state>* self, caf::actor target,
                          chaos_spec spec, uint64_t link_id) {
  self->link_to(target); // the target's failure is the relay's, and the other way round
  self->state.target = std::move(target);
  self->state.link.emplace(spec, link_id, link_kind::lossless);
  self->set_default_handler(
      [self](caf::scheduled_actor*, caf::message_view& x) { return relay(self, x); });
  return {
      [self](atom::timer, uint64_t id) {
        auto& st = self->state;
        auto it = st.held.find(id);
        if (it == st.held.end()) return;
        auto [rp, msg] = std::move(it->second);
        st.held.erase(it);
        rp.delegate(st.target, std::move(msg));
      },
  };
}

} // namespace kvactor
