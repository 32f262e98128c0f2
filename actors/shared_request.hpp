// One message for several receivers. A step's plan goes to every rank of a group; sent as typed
// requests it is copied once per rank (~2 us for 64 scheduled requests, each copy allocating
// every request's token vector). Built once and sent as the same caf::message, it is shared:
// CAF 0.17 copies a message's content only for a handler that takes it by non-const reference,
// and a rank reads its plan through a const one.
#pragma once

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/duration.hpp>
#include <caf/message.hpp>
#include <caf/replies_to.hpp>
#include <caf/response_type.hpp>

namespace kvactor {

/// A request of `msg`, which holds one `In`, to `dest`. The typed handle would not take a message
/// already built, so the receiver's signature is checked here at compile time instead.
template <class In, class Self, class Handle>
auto request_shared(Self* self, const Handle& dest, const caf::message& msg) {
  static_assert(
      caf::response_type_unbox<caf::signatures_of_t<Handle>, caf::detail::type_list<In>>::valid,
      "the receiver does not take this message");
  return self->request(caf::actor_cast<caf::actor>(dest), caf::infinite, msg);
}

} // namespace kvactor
