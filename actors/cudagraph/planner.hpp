// The CUDA graph plan (docs/vllm-semantics.md §7.3-§7.5): resolve the requested mode against the
// weakest attention support, pick capture sizes and list the graphs to capture. Pure C++, no CAF;
// the cudagraph actor and the tests call it directly.
#pragma once

#include <cstdint>
#include <vector>

#include "actors/cudagraph/capture_sizes.hpp"
#include "messages/backend.hpp"
#include "messages/cudagraph.hpp"
#include "messages/engine_config.hpp"
#include "messages/errc.hpp"

namespace kvactor {

/// Of scheduler_limits, max_num_seqs and max_num_batched_tokens bound the captured sizes.
struct cudagraph_options : scheduler_limits {
  cudagraph_mode requested = cudagraph_mode::full_and_piecewise;
  graph_support_info support;           // weakest attention support + backend
  int32_t uniform_decode_query_len = 1; // 1 + speculative tokens
  std::vector<int32_t> capture_sizes;   // empty = default ladder
  bool attention_splitting = true;      // piecewise compilation splits at attention ops
  bool has_mamba = false;
  int64_t num_blocks = 0; // for the Mamba check (§7.3 step 7); 0 = not known yet
};

/// Resolves the mode (§7.3; plan.notes gets one human-readable line per change), computes the
/// capture sizes and the descriptors to capture (§7.5):
/// - uniform-decode FULL graphs (tuple modes only): T = round_up(s, q), R = T / q per capture
///   size s, skipping T > max_num_seqs * q, T > the largest capture size or R > max_num_seqs;
/// - mixed graphs for every capture size: PIECEWISE with num_reqs 0 (no request padding), or FULL
///   (mode full) with num_reqs = min(s, max_num_seqs).
/// Both lists are sorted by num_tokens descending (capture order). Mode none yields no sizes and
/// no graphs; so does an empty size list (after filtering), with a note.
/// Fails with errc::invalid_argument on non-positive limits or capture sizes, errc::unsupported
/// when mode full meets a backend that never supports graphs, and errc::invalid_argument when
/// FULL graphs with Mamba layers need more requests than there are Mamba cache blocks.
expected<cudagraph_plan> plan_cudagraphs(const cudagraph_options& opt);

} // namespace kvactor
