// The KV cache planner: from per-rank layer specs and memory budgets to one KV cache config per
// rank with a common block count (docs/vllm-semantics.md §3.3–3.7, Era C).
#pragma once

#include <string>
#include <vector>

#include "actors/kv_cache/grouping.hpp"
#include "actors/kv_cache/layer_specs.hpp"
#include "messages/errc.hpp"
#include "messages/kv.hpp"

namespace kvactor {

/// Of cache_settings, num_gpu_blocks_override (0: plan from memory).
struct kv_plan_options : cache_settings {
  memory_limits limits;
  kv_cache_layout layout = kv_cache_layout::lbhnc;
  grouping_options grouping;
};

/// Bytes one block id occupies over all layers: the largest per-group sum of layer pages.
int64_t bytes_per_block(const std::vector<kv_cache_group>& groups);

/// Blocks one request of max_model_len needs, summed over groups (groups draw from one pool).
int64_t blocks_per_request(const std::vector<kv_cache_group>& groups, const memory_limits& lim);

/// Bytes one request of max_model_len needs: bytes_per_block x blocks_per_request.
int64_t max_memory_usage_from_groups(const std::vector<kv_cache_group>& groups,
                                     const memory_limits& lim);

/// Largest max_model_len in [1, lim.max_model_len] whose per-layer memory fits `available`;
/// 0 when not even one token fits.
int64_t estimate_max_model_len(const layer_spec_list& specs, const memory_limits& lim,
                               int64_t available);

/// num_blocks = available / bytes_per_block (or the override); one backing allocation that every
/// group overlays from byte 0; one tensor per (group, distinct per-layer spec).
kv_cache_config kv_cache_config_from_groups(const std::vector<kv_cache_group>& groups,
                                            int64_t available, const kv_plan_options& opt);

/// vLLM's capacity line: max_concurrency = num_blocks / blocks_per_request,
/// tokens = int(max_concurrency x max_model_len).
kv_cache_capacity kv_capacity(const kv_cache_config& cfg, const memory_limits& lim);

/// 163840 -> "163,840": thousands separators, as vLLM's capacity lines print counts.
std::string grouped(int64_t v);

/// Fails (insufficient_memory) when the budget, less the reserved null block, cannot hold one
/// request of max_model_len; the message says how much is needed and the longest length that fits.
status check_enough_memory(const std::vector<kv_cache_group>& groups, const layer_spec_list& specs,
                           const memory_limits& lim, int64_t available);

struct kv_plan {
  std::vector<kv_cache_config> per_rank;
  std::vector<int64_t> available_per_rank;   // after the override, if any
  std::vector<int64_t> planned_blocks;       // per rank before taking the minimum
  std::vector<kv_cache_group> global_groups; // all layers of all ranks
  std::vector<std::string> warnings;
};

/// Plans every rank. Layers with one name must have one spec on every rank; every rank ends up
/// with the minimum block count over ranks.
expected<kv_plan> plan_kv_cache(const std::vector<layer_spec_list>& specs_per_rank,
                                const std::vector<int64_t>& available_per_rank,
                                const kv_plan_options& opt);

} // namespace kvactor
