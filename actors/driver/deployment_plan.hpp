// What a deployment will look like before anything is allocated: the driver's planning core.
// It runs, as plain functions, the sequence each rank follows at start-up
// (docs/vllm-semantics.md §1.10): layers -> specs -> KV cache plan (minimum over ranks) ->
// attention groups and kernel block sizes -> CUDA graph mode and candidates -> tensors and
// per-layer views.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "actors/kv_cache/planner.hpp"
#include "actors/registry/registry.hpp"
#include "messages/backend.hpp"
#include "messages/cudagraph.hpp"
#include "messages/engine_config.hpp"
#include "messages/kv.hpp"
#include "messages/layer.hpp"
#include "model/loader.hpp"

namespace kvactor {

/// Where the KV cache budget of each rank comes from: an explicit size (one value for all ranks
/// or one per rank), or a device size x utilization less the weights.
struct memory_budget {
  std::vector<int64_t> kv_cache_memory;
  int64_t gpu_memory = 0;
  double gpu_memory_utilization = 0.9;
  int64_t weights_memory = 0;
};

/// load: the split and the dtypes; max_model_len 0: the model's max_position_embeddings.
struct plan_request : cache_settings, scheduler_limits, graph_settings {
  std::string model; // path or shipped name
  load_options load;
  device_kind device = device_kind::cuda;
  std::string attention_backend = "auto";
  int32_t num_speculative_tokens = 0;
  memory_budget budget;
  kv_cache_layout layout = kv_cache_layout::lbhnc;
  bool disable_hybrid_kv_cache_manager = false;
  bool allow_chunked_local_attn_with_hybrid_kv_cache = false; // vLLM's environment switch
  bool kv_sharing_fast_prefill = false;
};

struct rank_summary {
  int32_t rank = 0;
  int32_t num_heads = 0;    // query heads on this rank
  int32_t num_kv_heads = 0; // KV heads on this rank
  int64_t available_bytes = 0;
  int64_t planned_blocks = 0; // before taking the minimum over ranks
  int64_t num_blocks = 0;
};

struct deployment_plan {
  plan_request request; // with defaults resolved
  std::string model_path;
  std::vector<model_layout> ranks;
  memory_limits limits;
  kv_cache_config config; // rank 0; every rank has the same block count
  /// config.groups plus KV-sharing layers (appended to their target's group) and the
  /// encoder-only groups (no memory); index = KV cache group id.
  std::vector<kv_cache_group> groups;
  std::vector<std::vector<attention_group>> attention_groups;
  std::vector<int32_t> kernel_block_sizes; // 0 = none (encoder-only)
  graph_support_info graph_support;
  std::string query_lens_mismatch_backend; // empty = all tolerate it
  cudagraph_plan cudagraphs;
  kv_cache_capacity capacity;
  int64_t bytes_per_block = 0;
  std::vector<kv_cache_view> views; // rank 0, KV-sharing layers alias their target's view
  std::map<std::string, std::string> kv_sharing;
  std::set<std::string> fast_prefill_layers;
  std::vector<rank_summary> per_rank;
  std::vector<std::string> warnings;
};

/// The manager block size attention groups use (the request's, unless hybrid state alignment
/// raised it).
int32_t attention_block_size(const deployment_plan& plan);

/// Plans a deployment; every failure names the flag or field and the value at fault.
expected<deployment_plan> plan_deployment(const plan_request& request);

} // namespace kvactor
