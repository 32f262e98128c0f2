// The injection gateway: takes one message envelope for a named actor of this process, delivers
// it as that actor's typed message, and answers with the actor's reply. Published on loopback by
// `kvactor run --inject-port PORT`; `kvactor inject` is its client.
#pragma once

#include <memory>
#include <vector>

#include "actors/interfaces.hpp"
#include "actors/trace_recorder.hpp"

namespace kvactor {

struct injector_setup {
  driver_actor driver;
  std::vector<rank_actor> ranks;
  std::shared_ptr<trace_recorder> recorder; // injected messages are recorded as from "inject"
};

struct injector_state {
  injector_setup setup;
  static inline const char* name = "kvactor.injector";
  injector_state() = default;
};

injector_actor::behavior_type injector(injector_actor::stateful_pointer<injector_state> self,
                                       injector_setup setup);

} // namespace kvactor
