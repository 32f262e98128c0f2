// Physical layout of the KV cache allocation: strides and per-layer views
// (docs/vllm-semantics.md §2.6).
#pragma once

#include <array>
#include <cstdint>

#include "messages/errc.hpp"
#include "messages/kv.hpp"

namespace kvactor {

/// Logical dims of one allocation, in this order: [L, B, H, N, C] (C in bytes).
enum layout_dim : int { dim_l = 0, dim_b = 1, dim_h = 2, dim_n = 3, dim_c = 4 };
using dims5 = std::array<int64_t, 5>;

/// Physical order of the logical dims, outermost first.
std::array<layout_dim, 5> physical_order(kv_cache_layout layout);
bool is_layer_compact(kv_cache_layout layout);   // L outermost
bool is_block_outermost(kv_cache_layout layout); // B outermost

/// Byte strides of [L, B, H, N, C]. `fixed` entries > 0 override the running product; with a
/// padded page the stride of the innermost of {L, B} becomes the padded page.
dims5 layout_strides(kv_cache_layout layout, const dims5& sizes, const dims5& fixed = {},
                     int64_t padded_page = 0);

/// One layer's strided view of `tensor` (which must list `layer`), split into kernel blocks of
/// `kernel_block_size` tokens (0 = the manager block size). Fails when a padded page or a
/// non-dense block would have to be split.
expected<kv_cache_view> layer_view(const kv_cache_tensor& tensor, const std::string& layer,
                                   const kv_cache_spec& spec, int64_t num_blocks,
                                   kv_cache_layout layout, int32_t kernel_block_size = 0);

} // namespace kvactor
