// Internal: the arguments of the KV write kernel, and its launch function (kv_write_kernel.cu).
// Compiled as C++17 by nvcc: no header of kvactor/kernels/ but cuda/cuda_check.h is included.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kvactor/kernels/cuda/cuda_check.h"

namespace kvactor::kernels::cuda_detail {

struct kv_write_args {
  void* cache; // view.base: bf16 or f16 bits, or FP8 E4M3 codes
  int64_t stride_block, stride_head, stride_token;
  int64_t capacity; // num_blocks * block_size
  int32_t block_size, num_heads, head_size, head_size_v;
  float k_scale, v_scale;      // FP8: the code stored is that of k / k_scale, v / v_scale
  const uint16_t* k;           // [num_tokens, num_heads, head_size] bf16 or f16 bits
  const uint16_t* v;           // [num_tokens, num_heads, head_size_v] or nullptr
  const int64_t* slot_mapping; // [num_tokens]
  int32_t num_tokens;
};

/// How the cache stores what the KV write gets (bf16 or f16 bits).
enum class kv_write_kind {
  copy,     // the same 16-bit type
  fp8_bf16, // FP8 codes of bf16 inputs
  fp8_f16,  // FP8 codes of f16 inputs
};

/// One CTA per token. vectorized: 8 elements per access, REQUIRES every pointer 16-byte aligned
/// and every size and stride a multiple of 8 elements; else one element per access.
cuda_status launch_kv_write(const kv_write_args& a, kv_write_kind kind, bool vectorized,
                            cudaStream_t stream);

} // namespace kvactor::kernels::cuda_detail
