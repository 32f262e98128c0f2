// Start-up protocol between the driver, the ranks and each rank's children
// (registry, kv_cache, builder[u], cudagraph). Only plans, sizes and handles travel here; the
// KV cache memory and the metadata buffers stay with the actors that own them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "messages/backend.hpp"
#include "messages/cudagraph.hpp"
#include "messages/device.hpp"
#include "messages/engine_config.hpp"
#include "messages/kv.hpp"
#include "messages/layer.hpp"

namespace kvactor {

/// Everything a rank needs to configure itself: the model, its parallel slot and its budget.
/// The engine settings come from their groups (engine_config.hpp); max_model_len is resolved.
struct rank_config : parallel_settings,
                     dtype_settings,
                     cache_settings,
                     scheduler_limits,
                     graph_settings {
  int32_t rank = 0;
  std::string model; // path or shipped name
  device_kind device = device_kind::cpu;
  std::string attention_backend = "auto";
  int64_t kv_cache_memory = 0; // this rank's budget in bytes
  int32_t num_ubatches = 1;
  uint64_t seed = 0;
  /// The registered executor that runs the steps (actors/rank/executor_registry.hpp); empty: the
  /// device's own ("cpu" or "cuda"). "protocol" runs the step protocol alone (no kernels).
  std::string executor;
  /// The driver's scheduler reuses cached full blocks of shared prefixes (kvactor run
  /// --enable-prefix-caching); carried here, like the scheduler limits above, so that a recorded
  /// run's driver replays with it.
  bool enable_prefix_caching = false;

  bool operator==(const rank_config&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, rank_config& x) {
  return f(caf::meta::type_name("kvactor::rank_config"), x.rank, x.tensor_parallel_size, x.model,
           x.dtype, x.kv_cache_dtype, x.device, x.attention_backend, x.block_size, x.max_model_len,
           x.max_num_seqs, x.max_num_batched_tokens, x.kv_cache_memory, x.num_gpu_blocks_override,
           x.cudagraph, x.cudagraph_capture_sizes, x.cudagraph_lazy, x.cudagraph_memory,
           x.num_ubatches, x.seed, x.executor, x.enable_prefix_caching);
}

/// How long one start-up phase took and the memory it holds afterwards.
struct phase_timing {
  std::string phase;
  int64_t duration_ns = 0;
  int64_t memory_bytes = 0; // what the phase reports allocating (KV cache, graphs), else 0
  int64_t ledger_bytes = 0; // what the rank's memory ledger holds after the phase, in all
  // A GPU rank: the device memory gone since the rank started (cudaMemGetInfo), which exceeds
  // ledger_bytes by the CUDA context, library workspaces and anything the ledger misses; -1
  // where not measured (a CPU rank).
  int64_t device_used_bytes = -1;

  bool operator==(const phase_timing&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, phase_timing& x) {
  return f(caf::meta::type_name("kvactor::phase_timing"), x.phase, x.duration_ns, x.memory_bytes,
           x.ledger_bytes, x.device_used_bytes);
}

/// The registry's answer for a rank: attention groups per KV cache group, kernel block sizes
/// and the weakest graph support.
struct backend_assignment {
  std::vector<std::vector<attention_group>> attention_groups;
  std::vector<int32_t> kernel_block_sizes; // per KV cache group, 0 = none
  graph_support_info support;
  std::string query_lens_mismatch_backend;

  bool operator==(const backend_assignment&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, backend_assignment& x) {
  return f(caf::meta::type_name("kvactor::backend_assignment"), x.attention_groups,
           x.kernel_block_sizes, x.support, x.query_lens_mismatch_backend);
}

/// Rank -> kv_cache: plan this rank's layers with its own budget.
struct kv_plan_request : cache_settings {
  memory_limits limits;
  int64_t available_bytes = 0;
  kv_cache_layout layout = kv_cache_layout::lbhnc;

  bool operator==(const kv_plan_request&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, kv_plan_request& x) {
  return f(caf::meta::type_name("kvactor::kv_plan_request"), x.limits, x.block_size,
           x.available_bytes, x.num_gpu_blocks_override, x.layout);
}

/// Rank -> cudagraph: which graphs this rank may capture.
/// Of scheduler_limits, the graph manager reads max_num_seqs and max_num_batched_tokens.
struct cudagraph_request : scheduler_limits {
  cudagraph_mode requested = cudagraph_mode::full_and_piecewise;
  graph_support_info support;
  int32_t uniform_decode_query_len = 1;
  std::vector<int32_t> capture_sizes;
  bool has_mamba = false;
  int64_t num_blocks = 0;
  bool gpu = false;  // graphs need a GPU; a CPU rank runs every step eagerly
  bool lazy = false; // capture as batches are seen (most wanted first), not all at start-up
  int64_t memory_cap = int64_t{1} << 30; // bytes all captured graphs may hold together
  std::string not_capturable;            // non-empty: why this rank captures nothing (a note)

  bool operator==(const cudagraph_request&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, cudagraph_request& x) {
  return f(caf::meta::type_name("kvactor::cudagraph_request"), x.requested, x.support,
           x.uniform_decode_query_len, x.max_num_seqs, x.max_num_batched_tokens, x.capture_sizes,
           x.has_mamba, x.num_blocks, x.gpu, x.lazy, x.memory_cap, x.not_capturable);
}

/// What one owner holds in the memory ledger.
struct memory_entry {
  std::string owner; // "kv_cache", "weights", "activations" ...
  int64_t bytes = 0;

  bool operator==(const memory_entry&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, memory_entry& x) {
  return f(caf::meta::type_name("kvactor::memory_entry"), x.owner, x.bytes);
}

/// What kv_cache planned with the rank's own budget, before the minimum over ranks.
struct kv_local_plan {
  kv_cache_config config;
  int64_t available_bytes = 0;
  std::vector<std::string> warnings;

  bool operator==(const kv_local_plan&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, kv_local_plan& x) {
  return f(caf::meta::type_name("kvactor::kv_local_plan"), x.config, x.available_bytes, x.warnings);
}

/// The allocation kv_cache made: one backing buffer (by handle), its per-layer views.
struct kv_allocation {
  uint64_t buffer_handle = 0;
  int64_t num_blocks = 0;
  int64_t bytes = 0;
  std::vector<kv_cache_view> views; // KV-sharing layers alias their target

  bool operator==(const kv_allocation&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, kv_allocation& x) {
  return f(caf::meta::type_name("kvactor::kv_allocation"), x.buffer_handle, x.num_blocks, x.bytes,
           x.views);
}

/// Rank -> driver after configuring: its local plan (the driver takes the minimum over ranks).
struct rank_plan {
  int32_t rank = 0;
  kv_local_plan kv;
  backend_assignment backends;
  std::vector<phase_timing> phases;

  bool operator==(const rank_plan&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, rank_plan& x) {
  return f(caf::meta::type_name("kvactor::rank_plan"), x.rank, x.kv, x.backends, x.phases);
}

/// Rank -> driver when it can take steps.
struct rank_ready {
  int32_t rank = 0;
  int64_t num_blocks = 0;
  int64_t kv_cache_bytes = 0;
  cudagraph_plan graphs;
  std::vector<phase_timing> phases;
  int32_t vocab_size = 0; // the model's: a prompt token at or above it is refused by the driver

  bool operator==(const rank_ready&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, rank_ready& x) {
  return f(caf::meta::type_name("kvactor::rank_ready"), x.rank, x.num_blocks, x.kv_cache_bytes,
           x.graphs, x.phases, x.vocab_size);
}

/// Rank -> builder[u]: build the metadata of this slice of the current step's batch.
struct ubatch_work {
  uint64_t seq = 0;
  int32_t ubatch = 0;
  int32_t token_start = 0;
  int32_t token_end = 0;
  int32_t req_start = 0;
  int32_t req_end = 0;

  bool operator==(const ubatch_work&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, ubatch_work& x) {
  return f(caf::meta::type_name("kvactor::ubatch_work"), x.seq, x.ubatch, x.token_start,
           x.token_end, x.req_start, x.req_end);
}

/// Builder[u] -> rank: the metadata of the slice is in the builder's persistent buffers.
struct metadata_ready {
  uint64_t seq = 0;
  int32_t ubatch = 0;
  int32_t num_reqs = 0;
  int32_t num_tokens = 0;
  int64_t build_ns = 0;
  uint64_t digest = 0; // of the metadata built (replay compares it); 0 when not asked for

  bool operator==(const metadata_ready&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, metadata_ready& x) {
  return f(caf::meta::type_name("kvactor::metadata_ready"), x.seq, x.ubatch, x.num_reqs,
           x.num_tokens, x.build_ns, x.digest);
}

} // namespace kvactor
