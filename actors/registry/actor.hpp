// The registry actor shell: messages in, backend_registry calls, replies out.
#pragma once

#include <vector>

#include "actors/interfaces.hpp"
#include "actors/registry/registry.hpp"

namespace kvactor {

struct registry_state {
  backend_registry backends;
  static inline const char* name = "kvactor.registry";
  registry_state() = default;
};

/// Spawns with the built-in backends plus `extra` (test backends). A duplicate name is a
/// configuration error, reported by quitting with that error.
registry_actor::behavior_type registry(registry_actor::stateful_pointer<registry_state> self,
                                       std::vector<backend_capabilities> extra);

} // namespace kvactor
