// The cudagraph actor shell: graph planning and dispatch. Capture and replay come with the CUDA
// path; on a CPU rank every batch dispatches to eager mode.
#pragma once

#include <memory>

#include "actors/cudagraph/dispatcher.hpp"
#include "actors/interfaces.hpp"

namespace kvactor {

struct cudagraph_state {
  cudagraph_plan plan;
  std::unique_ptr<graph_dispatcher> dispatcher; // set by a successful plan
  int32_t max_num_seqs = 0;
  static inline const char* name = "kvactor.cudagraph";
  cudagraph_state() = default;
};

cudagraph_actor::behavior_type cudagraph(cudagraph_actor::stateful_pointer<cudagraph_state> self);

} // namespace kvactor
