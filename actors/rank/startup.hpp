// The rank's start-up as pure steps (no CAF): what it asks its children for and how it binds
// their answers. actors/rank/actor.cpp sequences these steps; tests call them directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/metadata/step_batch.hpp"
#include "actors/rank/executor.hpp"
#include "kvactor/kernels/layer_batch.h"
#include "messages/errc.hpp"
#include "messages/kv.hpp"
#include "messages/layer.hpp"
#include "messages/runtime.hpp"

namespace kvactor {

/// configure: the driver's rank and TP size against the communicator the rank joined. Errors
/// name the field (tensor_parallel_size, rank) and both values.
status check_communicator(const rank_config& cfg, int32_t comm_rank, int32_t comm_world);

/// The KV cache plan this rank asks its kv_cache for; max_model_len 0 means the model's
/// max_position_embeddings.
kv_plan_request kv_plan_request_for(const rank_config& cfg, const model_layout& model);

/// vLLM's start-up lines about the KV cache, which rank 0 logs at info level once it is
/// allocated: "Available KV cache memory: 20.00 GiB", "GPU KV cache size: 163,840 tokens" (CPU
/// on a CPU rank) and "Maximum concurrency for 8,192 tokens per request: 20.00x" (kv_capacity).
std::vector<std::string> kv_capacity_lines(const kv_cache_config& cfg, const memory_limits& lim,
                                           int64_t available_bytes, device_kind device);

/// How the stack's layers meet the allocated KV cache.
struct kv_binding {
  std::vector<kernels::kv_view> views;  // [stack layers]; a layer without a view stays empty
  std::vector<std::string> layer_names; // [stack layers] the names builders key metadata by
  std::vector<int32_t> layer_group;     // [stack layers] KV cache group (0 when in none)
};

/// One kernel view per layer of `model` over `base` (KV-sharing layers alias their target's
/// view, as the allocation lists it), and each layer's group among `groups` (as bound: planned
/// groups first). Fails when a view does not fit the kernels (kernel_view's error).
expected<kv_binding> bind_layers(const model_layout& model,
                                 const std::vector<kv_cache_group>& groups,
                                 const std::vector<kv_cache_view>& views, std::byte* base);

/// The geometry of the memory-owning groups: block sizes (the kernel's where the registry chose
/// one, else the manager's) and whether positions index the blocks (not for state groups).
/// REQUIRES: kernel_block_sizes.size() >= planned.size().
std::vector<group_geometry> group_geometries(const std::vector<kv_cache_group>& planned,
                                             const std::vector<int32_t>& kernel_block_sizes);

/// The attention groups of the memory-owning groups, the ones builders make metadata for.
std::vector<std::vector<attention_group>>
builder_attention_groups(const backend_assignment& backends, size_t num_planned_groups);

/// What the rank asks its graph manager to plan. `gpu`: the executor runs on a GPU (with tensor
/// parallelism too: the all-reduces are captured into the graphs).
cudagraph_request cudagraph_request_for(const rank_config& cfg, const graph_support_info& support,
                                        int64_t num_blocks, bool gpu);

/// The persistent graph inputs an executor sets up for `plan`; `widths` are the kernel
/// block-table entries per request of each group (step_state::widths()).
/// REQUIRES: !plan.capture_sizes.empty().
graph_setup graph_setup_for(const cudagraph_plan& plan, const std::vector<int32_t>& layer_group,
                            int32_t max_num_seqs, const std::vector<int32_t>& widths);

} // namespace kvactor
