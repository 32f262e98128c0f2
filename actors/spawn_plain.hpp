// Spawning a behaviour that takes no argument but its self pointer. CAF 0.17 binds a reference to
// a null argument tuple when an actor is spawned without arguments (detail/init_fun_factory.hpp
// dereferences the empty tuple's null shared_ptr): undefined behaviour that UBSan stops on. So
// such behaviours are spawned as plain<&behaviour> with one ignored argument, `nullptr`:
//   self->spawn(plain<&cudagraph>, nullptr)
#pragma once

#include <cstddef>

namespace kvactor {

namespace detail {

template <class F>
struct self_only;

template <class Result, class Self>
struct self_only<Result (*)(Self)> {
  using self = Self;
  using result = Result;
};

} // namespace detail

/// `Behavior` (a function of its self pointer alone) with an ignored second argument.
template <auto Behavior>
typename detail::self_only<decltype(Behavior)>::result
plain(typename detail::self_only<decltype(Behavior)>::self self, std::nullptr_t) {
  return Behavior(self);
}

} // namespace kvactor
