// One message for several receivers. A step's plan goes to every rank of a group; sent as typed
// requests it is copied once per rank by the sender, one copy after the other (~2 us each for 64
// scheduled requests: each copy allocates every request's token vector). Built once and sent as
// the same caf::message, it is shared: CAF 0.17 copies a message's content only for a handler
// that takes it by non-const reference, and a rank reads its plan through a const one. (A rank
// keeps its own copy of the step, made on its own thread, in parallel with the other ranks.)
#pragma once

#include <cassert>
#include <type_traits>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/check_typed_input.hpp>
#include <caf/duration.hpp>
#include <caf/message.hpp>
#include <caf/replies_to.hpp>
#include <caf/response_type.hpp>

namespace kvactor {

/// A request of `msg`, which holds one `In`, to `dest`. The typed handle would not take a message
/// already built, so the receiver's signature is checked here at compile time instead. The answer
/// is untyped: the caller's handlers are matched when it arrives (an answer of another type is an
/// unexpected_response error).
template <class In, class Self, class Handle>
auto request_shared(Self* self, const Handle& dest, const caf::message& msg) {
  static_assert(!std::is_same_v<Handle, caf::actor>, "a typed handle: its signature is checked");
  static_assert(
      caf::response_type_unbox<caf::signatures_of_t<Handle>, caf::detail::type_list<In>>::valid,
      "the receiver does not take this message");
  assert(msg.match_elements<In>());
  return self->request(caf::actor_cast<caf::actor>(dest), caf::infinite, msg);
}

} // namespace kvactor
