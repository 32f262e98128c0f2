// One layer's KV cache as the kernels see it: a strided [B, H, N, C] view of the cache planner's
// allocation (kvactor::kv_cache_view from actors/kv_cache/layout.hpp, reduced to raw numbers so
// that kernels depend on nothing in messages/). The rank builds a kv_view from a kv_cache_view:
//   base = allocation + offset_bytes, {num_blocks, num_heads, block_size, content} = shape,
//   {stride_block, stride_head, stride_token} = strides[0..2] (strides[3] is 1).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kvactor/kernels/float_convert.h"

namespace kvactor::kernels {

/// fp8_e4m3: vLLM's FP8 KV cache, one byte per element, value = code x the view's per-tensor
/// scale (k_scale for K, v_scale for V).
enum class element_type { f32, bf16, f16, fp8_e4m3 };

const char* to_string(element_type t);
size_t element_size(element_type t);

/// The cache entry of (block b, head h, token n) starts at element
///   b * stride_block + h * stride_head + n * stride_token
/// and holds `content` contiguous elements: K in [0, head_size), then V (MLA: the latent alone).
struct kv_view {
  void* base = nullptr;
  element_type type = element_type::f32;
  int64_t num_blocks = 0; // kernel blocks
  int32_t num_heads = 0;  // KV heads of this rank
  int32_t block_size = 0; // tokens per kernel block
  int32_t content = 0;    // elements per (head, token): K then V
  int64_t stride_block = 0, stride_head = 0, stride_token = 0; // in elements
  // fp8_e4m3 only (other types store values and ignore them): content[0, head_size) holds
  // K / k_scale and the rest V / v_scale, so value = code x scale. MLA's latent, K and V at
  // once, uses k_scale. vLLM's default when a checkpoint brings no scales is 1.
  float k_scale = 1.0f, v_scale = 1.0f;

  int64_t capacity_tokens() const { return num_blocks * block_size; }
};

/// Throws std::invalid_argument (naming `what` and the field) unless the view is usable:
/// non-null base, positive sizes and strides, and a token stride that leaves room for `content`.
void check_view(const kv_view& view, const char* what);

/// Calls f(T{}) with T the storage type of `t` (float, bf16_t, f16_t or fp8_t), so a kernel is
/// written once as a template over the storage type.
template <class F>
decltype(auto) dispatch_element_type(element_type t, F&& f) {
  switch (t) {
  case element_type::bf16: return f(bf16_t{});
  case element_type::f16: return f(f16_t{});
  case element_type::fp8_e4m3: return f(fp8_t{});
  case element_type::f32: break;
  }
  return f(float{});
}

/// The factors that turn stored K and V elements into values: the view's scales for FP8, 1 for
/// the types that store values.
inline float key_scale(const kv_view& view) {
  return view.type == element_type::fp8_e4m3 ? view.k_scale : 1.0f;
}
inline float value_scale(const kv_view& view) {
  return view.type == element_type::fp8_e4m3 ? view.v_scale : 1.0f;
}

/// First element of the entry of (block, head, token), typed. REQUIRES: T matches view.type.
template <class T>
T* entry(const kv_view& view, int64_t block, int32_t head, int32_t token) {
  return static_cast<T*>(view.base) + block * view.stride_block + head * view.stride_head
         + static_cast<int64_t>(token) * view.stride_token;
}

} // namespace kvactor::kernels
