// The engine settings, each declared once, in groups as vLLM's VllmConfig holds them (its
// ParallelConfig, ModelConfig's dtypes, CacheConfig, SchedulerConfig, CompilationConfig's graphs).
// A struct that carries a group's settings derives from the group instead of declaring them again:
// the flags of `plan` and `run` (plan_flags), the request of the planning core (plan_request), the
// rank_config a driver sends each rank, the driver's scheduler_config, the load options of a model
// config and the requests a rank sends its KV cache and graph manager.
// tests/lint/engine_settings.py fails when another config struct declares one of these fields
// again.
//
// Each group's check() names the bad setting as it entered (the flag, or the message's field);
// the ranges are limits.hpp's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "messages/cudagraph.hpp"
#include "messages/errc.hpp"
#include "messages/limits.hpp"

namespace kvactor {

/// How the model is split (vLLM's ParallelConfig).
struct parallel_settings {
  int32_t tensor_parallel_size = 1; // ranks that split the heads
  bool operator==(const parallel_settings&) const = default;
};

/// The types the model computes in and its KV cache holds, as the user names them.
struct dtype_settings {
  std::string dtype = "auto";          // auto|bfloat16|float16|float32 (auto: the checkpoint's)
  std::string kv_cache_dtype = "auto"; // auto (the model's dtype)|fp8 (fp8_e4m3)
  bool operator==(const dtype_settings&) const = default;
};

/// The KV cache's blocks (vLLM's CacheConfig).
struct cache_settings {
  int32_t block_size = 16;             // tokens per KV cache block
  int64_t num_gpu_blocks_override = 0; // 0: as many blocks as the budget holds
  bool operator==(const cache_settings&) const = default;
};

/// What one step and one request may hold (vLLM's SchedulerConfig).
struct scheduler_limits {
  int32_t max_num_seqs = 256;            // requests per step
  int32_t max_num_batched_tokens = 2048; // tokens per step: the token budget
  int64_t max_model_len = 0;             // tokens per request; 0: the model's own
  bool operator==(const scheduler_limits&) const = default;
};

/// Copies group `Group` of `from` into `to`, which both carry it:
/// take<scheduler_limits>(request, flags).
template <class Group, class To, class From>
void take(To& to, const From& from) {
  static_cast<Group&>(to) = static_cast<const Group&>(from);
}

/// CUDA graphs (vLLM's CompilationConfig: cudagraph_mode, cudagraph_capture_sizes).
struct graph_settings {
  cudagraph_mode cudagraph = cudagraph_mode::full_and_piecewise;
  std::vector<int32_t> cudagraph_capture_sizes; // empty: the ladder from max_num_seqs
  bool cudagraph_lazy = false;                  // capture between steps, as batches are seen
  int64_t cudagraph_memory = int64_t{1} << 30;  // bytes all graphs may hold together
  bool operator==(const graph_settings&) const = default;
};

status check(const parallel_settings& x, named_as as);
status check(const cache_settings& x, named_as as);
status check(const scheduler_limits& x, named_as as);

} // namespace kvactor
