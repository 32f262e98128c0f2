// The chaos relay (testing: kvactor run --chaos): an actor that stands in front of another and
// passes every message on to it, some of them late by the link's seeded schedule. Replies go from
// the target straight back to the sender, so a late request is a late reply and the replies of
// one step (a rank's builders, its graph manager) come back in any order. The relay is lossless:
// one process's mailboxes never lose or repeat a message, and a rank's builders read the step's
// batch in memory the rank owns, which only ordering by replies keeps safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/fwd.hpp>
#include <caf/message.hpp>
#include <caf/response_promise.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/chaos/chaos_link.hpp"

namespace kvactor {

struct chaos_relay_state {
  caf::actor target;
  std::optional<chaos_link> link;
  std::map<uint64_t, std::pair<caf::response_promise, caf::message>> held; // late messages
  uint64_t next_id = 0;
  static inline const char* name = "kvactor.chaos_relay";
};

caf::behavior chaos_relay(caf::stateful_actor<chaos_relay_state>* self, caf::actor target,
                          chaos_spec spec, uint64_t link_id);

/// `target` behind a relay spawned by `parent` (the same handle type, so callers need no change).
template <class Handle, class Parent>
Handle behind_chaos(Parent* parent, const Handle& target, const chaos_spec& spec,
                    uint64_t link_id) {
  return caf::actor_cast<Handle>(
      parent->spawn(chaos_relay, caf::actor_cast<caf::actor>(target), spec, link_id));
}

} // namespace kvactor
