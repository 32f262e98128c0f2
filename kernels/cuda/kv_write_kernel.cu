// KV write kernel: one CTA per token; its threads copy the token's K and V rows of every head
// into the cache entry, 8 elements (16 bytes) per access when everything is aligned for it. An
// FP8 cache gets the E4M3 code of each value over its scale (round to nearest even, saturated
// to +-448, as vLLM quantises).
#include <cuda_fp8.h>

#include "device_utils.cuh"
#include "kv_write_args.h"
#include "launch_utils.cuh"

namespace kvactor::kernels::cuda_detail {
namespace {

// The cache entry's first element and the source row of chunk c (`per` elements) of head h.
struct chunk_at {
  int64_t dst;         // element offset in the cache
  const uint16_t* src; // bf16 or f16 bits
  bool is_k;
};

__device__ __forceinline__ chunk_at locate(const kv_write_args& a, int64_t t, int64_t block,
                                           int64_t offset, int h, int c, int per) {
  const int k_chunks = a.head_size / per;
  chunk_at at;
  at.dst = block * a.stride_block + h * a.stride_head + offset * a.stride_token + c * per;
  at.is_k = c < k_chunks;
  at.src = at.is_k ? a.k + (t * a.num_heads + h) * a.head_size + c * per
                   : a.v + (t * a.num_heads + h) * a.head_size_v + (c - k_chunks) * per;
  return at;
}

// Elem: uint4 (8 elements) or uint16_t (1) copied as they are. Out: the cache element type (a
// 16-bit copy) or FP8 codes of the inputs' values In (bf16 or f16) over the scale.
template <class Elem, class In, bool fp8>
__global__ void __launch_bounds__(128) kv_write_kernel(const kv_write_args a) {
  // Launched as a programmatic dependent: wait for the kernel that made k and v, then let the
  // attention kernel be scheduled (it waits for us before reading the cache).
  pdl_wait_for_predecessor();
  pdl_launch_dependents();
  constexpr int per = sizeof(Elem) / sizeof(uint16_t);
  const int64_t t = blockIdx.x;
  const int64_t slot = a.slot_mapping[t];
  if (slot < 0 || slot >= a.capacity) return; // -1: padding; past the cache: never written
  const int64_t block = slot / a.block_size;
  const int64_t offset = slot % a.block_size;
  const int row_chunks = (a.head_size + a.head_size_v) / per;
  for (int i = static_cast<int>(threadIdx.x); i < a.num_heads * row_chunks;
       i += static_cast<int>(blockDim.x)) {
    const chunk_at at = locate(a, t, block, offset, i / row_chunks, i % row_chunks, per);
    const Elem in = *reinterpret_cast<const Elem*>(at.src);
    if constexpr (!fp8) {
      *reinterpret_cast<Elem*>(static_cast<uint16_t*>(a.cache) + at.dst) = in;
    } else {
      const float scale = at.is_k ? a.k_scale : a.v_scale;
      uint16_t bits[per];
      __builtin_memcpy(bits, &in, sizeof(in));
      unsigned char codes[per];
#pragma unroll
      for (int e = 0; e < per; ++e) {
        In x;
        __builtin_memcpy(&x, &bits[e], 2);
        // Division, not a reciprocal product: the host reference divides.
        const float q = __fdiv_rn(static_cast<float>(x), scale);
        codes[e] = __nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3);
      }
      unsigned char* const dst = static_cast<unsigned char*>(a.cache) + at.dst;
      if constexpr (per == 8) {
        uint2 packed;
        __builtin_memcpy(&packed, codes, 8);
        *reinterpret_cast<uint2*>(dst) = packed;
      } else {
        *dst = codes[0];
      }
    }
  }
}

template <class In, bool fp8>
cudaError_t launch_typed(const kv_write_args& a, bool vectorized, cudaStream_t stream) {
  // A programmatic dependent: the kernel waits for its predecessor before it reads.
  const dim3 grid(static_cast<unsigned>(a.num_tokens));
  if (vectorized) return launch_ex(kv_write_kernel<uint4, In, fp8>, grid, 128, 0, true, stream, a);
  return launch_ex(kv_write_kernel<uint16_t, In, fp8>, grid, 128, 0, true, stream, a);
}

} // namespace

cuda_status launch_kv_write(const kv_write_args& a, kv_write_kind kind, bool vectorized,
                            cudaStream_t stream) {
  switch (kind) {
  case kv_write_kind::fp8_bf16:
    KVACTOR_CUDA_CALL((launch_typed<__nv_bfloat16, true>(a, vectorized, stream)));
    break;
  case kv_write_kind::fp8_f16:
    KVACTOR_CUDA_CALL((launch_typed<__half, true>(a, vectorized, stream)));
    break;
  case kv_write_kind::copy:
    KVACTOR_CUDA_CALL((launch_typed<uint16_t, false>(a, vectorized, stream)));
    break;
  }
  return {};
}

} // namespace kvactor::kernels::cuda_detail
