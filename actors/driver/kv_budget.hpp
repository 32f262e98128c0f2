// The KV cache budget of each rank: one rule for `kvactor plan` (which is told the GPU's size and
// the weights) and `kvactor run` (which measures them), with one rounding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "messages/errc.hpp"

namespace kvactor {

/// One GPU as the budget rule sees it.
struct gpu_memory_use {
  int64_t total_bytes = 0;
  double utilization = 0.9; // --gpu-memory-utilization, in (0, 1]
  int64_t in_use_bytes = 0; // taken before kvactor starts (run measures it; plan assumes 0)
  int64_t non_kv_bytes = 0; // what the rank holds besides its KV cache: weights, activations,
                            // CUDA context and workspaces, CUDA graph pools
};

/// vLLM's rule: ceil(total x utilization), less what is in use already, less what the rank holds
/// besides its KV cache. errc::insufficient_memory, naming every term, when nothing is left.
expected<int64_t> gpu_kv_cache_budget(const gpu_memory_use& gpu);

/// --kv-cache-memory as each rank's budget: one value for every rank, or one value per rank.
/// Fails naming the flag when the count fits neither.
expected<std::vector<int64_t>> per_rank_budgets(const std::vector<int64_t>& values, size_t ranks);

} // namespace kvactor
