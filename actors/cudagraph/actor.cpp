#include "actors/cudagraph/actor.hpp"

#include <algorithm>

#include <caf/all.hpp>
#include <fmt/format.h>

#include "actors/cudagraph/planner.hpp"
#include "actors/unexpected.hpp"
#include "messages/caf_error.hpp"

namespace kvactor {

namespace {

caf::error before_plan(const char* what) {
  return to_caf_error(
      make_error(errc::invalid_argument, fmt::format("{}: received before plan", what)));
}

// Plans the graphs a rank asked for and keeps the plan for dispatch and lazy capture.
caf::result<cudagraph_plan> plan_for(cudagraph_state& st, const cudagraph_request& req) {
  const bool capturable = req.gpu && req.not_capturable.empty();
  cudagraph_options opt;
  opt.requested = capturable ? req.requested : cudagraph_mode::none;
  opt.support = req.support;
  opt.uniform_decode_query_len = req.uniform_decode_query_len;
  take<scheduler_limits>(opt, req);
  opt.capture_sizes = req.capture_sizes;
  opt.has_mamba = req.has_mamba;
  opt.num_blocks = req.num_blocks;
  if (req.memory_cap < 0)
    return to_caf_error(
        make_error(errc::invalid_argument,
                   fmt::format("cudagraph memory cap: {} bytes is negative", req.memory_cap)));
  auto plan = plan_cudagraphs(opt);
  if (!plan) return to_caf_error(plan.err());
  plan->requested = req.requested;
  if (req.requested != cudagraph_mode::none) {
    if (!req.gpu)
      plan->notes.insert(plan->notes.begin(),
                         "cpu device: CUDA graphs need a GPU, every step runs eagerly");
    else if (!req.not_capturable.empty())
      plan->notes.insert(plan->notes.begin(), req.not_capturable);
    else if (req.lazy && plan->mode != cudagraph_mode::none)
      plan->notes.push_back(
          fmt::format("lazy capture: every step runs eagerly until its graph is captured, between "
                      "steps, most wanted first, within {} bytes",
                      req.memory_cap));
  }
  st.plan = *plan;
  st.lazy = req.lazy;
  st.max_num_seqs = req.max_num_seqs;
  st.capture =
      std::make_unique<lazy_capture>(*plan, req.max_num_seqs, req.memory_cap,
                                     req.lazy ? capture_order::as_seen : capture_order::planned);
  return std::move(*plan);
}

} // namespace

cudagraph_actor::behavior_type cudagraph(cudagraph_actor::stateful_pointer<cudagraph_state> self) {
  refuse_unexpected(self);
  return {
      [self](atom::plan, const cudagraph_request& req) -> caf::result<cudagraph_plan> {
        return plan_for(self->state, req);
      },
      [self](atom::dispatch, int32_t num_reqs, int32_t num_tokens,
             int32_t uniform) -> caf::result<batch_descriptor> {
        auto& st = self->state;
        if (!st.capture) return before_plan("dispatch");
        if (num_reqs < 0 || num_tokens < 0 || num_reqs > st.max_num_seqs)
          return to_caf_error(make_error(
              errc::invalid_argument,
              fmt::format("dispatch: num_reqs {} / num_tokens {} outside [0, max_num_seqs {}]",
                          num_reqs, num_tokens, st.max_num_seqs)));
        if (st.lazy) st.capture->observe(num_reqs, num_tokens, uniform);
        return st.capture->dispatch(num_reqs, num_tokens, uniform);
      },
      [self](atom::capture) -> caf::result<std::vector<batch_descriptor>> {
        auto& st = self->state;
        if (!st.capture) return before_plan("capture");
        std::vector<batch_descriptor> out;
        if (auto next = st.capture->next()) out.push_back(*next);
        return out;
      },
      [self](const cudagraph_captured& c) -> caf::result<int64_t> {
        auto& st = self->state;
        if (!st.capture) return before_plan("cudagraph_captured");
        const auto& all = st.plan;
        auto planned = [&](const auto& list) {
          return std::find(list.begin(), list.end(), c.graph) != list.end();
        };
        if (!planned(all.full_graphs) && !planned(all.piecewise_graphs))
          return to_caf_error(make_error(
              errc::invalid_argument,
              fmt::format("cudagraph_captured: the {} graph of {} tokens / {} requests is not in "
                          "the plan",
                          to_string(c.graph.mode), c.graph.num_tokens, c.graph.num_reqs)));
        if (c.error.empty())
          st.capture->captured(c.graph, c.bytes);
        else
          st.capture->skip(c.graph);
        return st.capture->memory_used();
      },
  };
}

} // namespace kvactor
