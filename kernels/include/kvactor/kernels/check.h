// Argument checks for kernel entry points (FlashInfer style): validate everything before any
// memory is touched, and throw std::invalid_argument naming the argument and the value at fault.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace kvactor::kernels::detail {

template <class... Args>
[[noreturn]] void throw_invalid_argument(Args&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(parts));
  throw std::invalid_argument(os.str());
}

} // namespace kvactor::kernels::detail

// KVACTOR_CHECK(cond, "argument: ", value, " is ..."): throws std::invalid_argument with the
// concatenated message when `cond` is false. Always compiled in: these are API contracts, not
// internal invariants (those use assert).
#define KVACTOR_CHECK(cond, ...)                                                                   \
  do {                                                                                             \
    if (!(cond)) ::kvactor::kernels::detail::throw_invalid_argument(__VA_ARGS__);                  \
  } while (0)
