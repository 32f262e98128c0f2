// Internal: the arguments of the KV write kernel, and its launch function (kv_write_kernel.cu).
// Compiled as C++17 by nvcc: no header of kvactor/kernels/ but cuda/cuda_check.h is included.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kvactor/kernels/cuda/cuda_check.h"

namespace kvactor::kernels::cuda_detail {

struct kv_write_args {
  uint16_t* cache; // view.base (bf16 or f16 bits)
  int64_t stride_block, stride_head, stride_token;
  int64_t capacity; // num_blocks * block_size
  int32_t block_size, num_heads, head_size, head_size_v;
  const uint16_t* k;           // [num_tokens, num_heads, head_size]
  const uint16_t* v;           // [num_tokens, num_heads, head_size_v] or nullptr
  const int64_t* slot_mapping; // [num_tokens]
  int32_t num_tokens;
};

/// One CTA per token. vectorized: 16-byte accesses, REQUIRES every pointer 16-byte aligned and
/// every size and stride a multiple of 8 elements; else 2-byte accesses.
cuda_status launch_kv_write(const kv_write_args& a, bool vectorized, cudaStream_t stream);

} // namespace kvactor::kernels::cuda_detail
