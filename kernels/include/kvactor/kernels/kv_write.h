// Reference KV write (vLLM's reshape_and_cache): scatter this step's K and V into the paged cache.
#pragma once

#include <cstdint>

#include "kvactor/kernels/kv_cache_view.h"

namespace kvactor::kernels {

/// For every token t with slot s = slot_mapping[t] >= 0, writes into the entry of
/// (block s / block_size, head h, token s % block_size), for every head h of the view:
///   content[0, head_size)                       = k[t, h, :]
///   content[head_size, head_size + head_size_v) = v[t, h, :]    (when v != nullptr)
/// rounding to the view's element type (nearest even; FP8 stores k / k_scale and v / v_scale,
/// saturated to +-448). Slot -1 marks a padding token: skipped.
/// MLA writes its latent as `k` with v == nullptr and head_size_v == 0.
///
///   k            // [num_tokens, num_heads, head_size]
///   v            // [num_tokens, num_heads, head_size_v] or nullptr
///   slot_mapping // [num_tokens]
///
/// Throws std::invalid_argument before writing anything when an argument is inconsistent
/// (a slot outside [-1, num_blocks * block_size), head_size + head_size_v > content, ...).
void write_kv(const kv_view& view, const float* k, int32_t head_size, const float* v,
              int32_t head_size_v, const int64_t* slot_mapping, int32_t num_tokens);

/// Runs exactly the argument checks of write_kv and nothing else.
void check_write_kv(const kv_view& view, const float* k, int32_t head_size, const float* v,
                    int32_t head_size_v, const int64_t* slot_mapping, int32_t num_tokens);

} // namespace kvactor::kernels
