// Test support for communicators (host and NCCL): what collective_error a call throws.
#pragma once

#include <functional>
#include <string>

#include "kvactor/comm/communicator.h"

namespace kvactor::comm::test {

/// Its kind and message; thrown == false (and kind transport) when nothing was thrown.
struct caught {
  bool thrown = false;
  collective_failure kind = collective_failure::transport;
  std::string what;
};

inline caught catch_collective(const std::function<void()>& f) {
  caught c;
  try {
    f();
  } catch (const collective_error& e) {
    c = {true, e.kind(), e.what()};
  }
  return c;
}

} // namespace kvactor::comm::test
