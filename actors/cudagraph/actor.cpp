#include "actors/cudagraph/actor.hpp"

#include <caf/all.hpp>
#include <fmt/format.h>

#include "actors/cudagraph/planner.hpp"
#include "messages/caf_error.hpp"

namespace kvactor {

cudagraph_actor::behavior_type cudagraph(cudagraph_actor::stateful_pointer<cudagraph_state> self) {
  return {
      [self](atom::plan, const cudagraph_request& req) -> caf::result<cudagraph_plan> {
        cudagraph_options opt;
        opt.requested = req.gpu ? req.requested : cudagraph_mode::none;
        opt.support = req.support;
        opt.uniform_decode_query_len = req.uniform_decode_query_len;
        opt.max_num_seqs = req.max_num_seqs;
        opt.max_num_batched_tokens = req.max_num_batched_tokens;
        opt.capture_sizes = req.capture_sizes;
        opt.has_mamba = req.has_mamba;
        opt.num_blocks = req.num_blocks;
        auto plan = plan_cudagraphs(opt);
        if (!plan) return to_caf_error(plan.err());
        plan->requested = req.requested;
        if (!req.gpu && req.requested != cudagraph_mode::none)
          plan->notes.insert(plan->notes.begin(),
                             "cpu device: CUDA graphs need a GPU, every step runs eagerly");
        self->state.plan = *plan;
        self->state.max_num_seqs = req.max_num_seqs;
        self->state.dispatcher = std::make_unique<graph_dispatcher>(*plan, req.max_num_seqs);
        return std::move(*plan);
      },
      [self](atom::dispatch, int32_t num_reqs, int32_t num_tokens,
             int32_t uniform) -> caf::result<batch_descriptor> {
        if (!self->state.dispatcher)
          return to_caf_error(make_error(errc::invalid_argument, "dispatch: received before plan"));
        if (num_reqs < 0 || num_tokens < 0 || num_reqs > self->state.max_num_seqs)
          return to_caf_error(make_error(
              errc::invalid_argument,
              fmt::format("dispatch: num_reqs {} / num_tokens {} outside [0, max_num_seqs {}]",
                          num_reqs, num_tokens, self->state.max_num_seqs)));
        return self->state.dispatcher->dispatch(num_reqs, num_tokens, uniform);
      },
  };
}

} // namespace kvactor
