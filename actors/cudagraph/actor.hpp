// The cudagraph actor shell: the graph manager of a rank. It plans the graphs (planner.hpp),
// decides which one the rank captures next, at start-up in plan order or lazily in the order of
// the batches seen (lazy_capture.hpp), and dispatches each batch to a captured graph or eager
// mode. The capture itself runs on the rank's GPU, in the rank's executor, which reports back.
#pragma once

#include <memory>

#include "actors/cudagraph/lazy_capture.hpp"
#include "actors/interfaces.hpp"

namespace kvactor {

struct cudagraph_state {
  cudagraph_plan plan;
  std::unique_ptr<lazy_capture> capture; // set by a successful plan
  bool lazy = false;
  int32_t max_num_seqs = 0;
  static inline const char* name = "kvactor.cudagraph";
  cudagraph_state() = default;
};

cudagraph_actor::behavior_type cudagraph(cudagraph_actor::stateful_pointer<cudagraph_state> self);

} // namespace kvactor
