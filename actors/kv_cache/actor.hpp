// The kv_cache actor shell over kv_cache_allocator. The allocator is shared with the rank that
// spawned it (the rank reads the buffer address once allocation is done; no tensor travels).
#pragma once

#include <memory>

#include "actors/interfaces.hpp"
#include "actors/kv_cache/allocation.hpp"

namespace kvactor {

struct kv_cache_state {
  std::shared_ptr<kv_cache_allocator> allocator;
  static inline const char* name = "kvactor.kv_cache";
  kv_cache_state() = default;
};

kv_cache_actor::behavior_type kv_cache(kv_cache_actor::stateful_pointer<kv_cache_state> self,
                                       std::shared_ptr<kv_cache_allocator> allocator);

} // namespace kvactor
