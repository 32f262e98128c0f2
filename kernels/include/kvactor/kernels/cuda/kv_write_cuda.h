// CUDA KV write (vLLM's reshape_and_cache) with the semantics of write_kv (kv_write.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kvactor/kernels/cuda/cuda_check.h"
#include "kvactor/kernels/kv_cache_view.h"

namespace kvactor::kernels {

/// For every token t with slot s = slot_mapping[t] >= 0, copies into the entry of
/// (block s / block_size, head h, token s % block_size), for every head h of the view:
///   content[0, head_size)                       = k[t, h, :]
///   content[head_size, head_size + head_size_v) = v[t, h, :]    (when v != nullptr)
/// The inputs of a bf16 or f16 cache have its element type, so the copy is exact (the bits of
/// write_kv fed with the same values); an FP8 cache takes bf16 or f16 inputs and stores the codes
/// write_kv stores for their values (k / k_scale, v / v_scale, nearest even, saturated at 448).
/// Slot -1 marks a padding token: skipped. MLA writes its latent as `k` with v == nullptr and
/// head_size_v == 0. Uses 16-byte loads whenever the pointers, strides and sizes are multiples
/// of 8 elements, one element at a time otherwise.
///
///   view         // device cache; type bf16, f16 or fp8_e4m3
///   k            // [num_tokens, num_heads, head_size]   device, element type `type`
///   v            // [num_tokens, num_heads, head_size_v] device, or nullptr
///   slot_mapping // [num_tokens] device
///
/// Returns a failed status (cudaErrorInvalidValue, naming the argument and its value) before any
/// CUDA call when an argument is inconsistent, or the CUDA call that failed. A slot outside
/// [-1, num_blocks * block_size) cannot be checked on the host: its token is skipped.
cuda_status kv_write_cuda(const kv_view& view, const void* k, const void* v, element_type type,
                          int32_t head_size, int32_t head_size_v, const int64_t* slot_mapping,
                          int32_t num_tokens, cudaStream_t stream);

/// Runs exactly the host argument checks of kv_write_cuda and nothing else (no CUDA call).
cuda_status check_kv_write_cuda(const kv_view& view, const void* k, const void* v,
                                element_type type, int32_t head_size, int32_t head_size_v,
                                const int64_t* slot_mapping, int32_t num_tokens);

} // namespace kvactor::kernels
