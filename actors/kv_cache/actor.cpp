#include "actors/kv_cache/actor.hpp"

#include <caf/all.hpp>

#include "actors/unexpected.hpp"
#include "messages/caf_error.hpp"

namespace kvactor {

kv_cache_actor::behavior_type kv_cache(kv_cache_actor::stateful_pointer<kv_cache_state> self,
                                       std::shared_ptr<kv_cache_allocator> allocator) {
  refuse_unexpected(self);
  self->state.allocator = std::move(allocator);
  return {
      [self](atom::plan, const model_layout& model,
             const kv_plan_request& request) -> caf::result<kv_local_plan> {
        auto out = self->state.allocator->plan(model, request);
        if (!out) return to_caf_error(out.err());
        return std::move(*out);
      },
      [self](atom::allocate, int64_t num_blocks,
             const std::vector<int32_t>& kernel_block_sizes) -> caf::result<kv_allocation> {
        if (self->state.allocator->config().groups.empty()
            && self->state.allocator->config().num_blocks == 0)
          return to_caf_error(
              make_error(errc::invalid_argument, "allocate: received before a successful plan"));
        auto out = self->state.allocator->allocate(num_blocks, kernel_block_sizes);
        if (!out) return to_caf_error(out.err());
        return std::move(*out);
      },
      [self](atom::ledger) { return self->state.allocator->ledger(); },
  };
}

} // namespace kvactor
