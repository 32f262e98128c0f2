// Internal: the float arithmetic and loads that the dense kernels share (decoder_ops.cu,
// skinny_gemm.cu), so that two kernels computing the same value give the same bits.
// Compiled as C++17 by nvcc.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace kvactor::kernels::cuda_detail {

__device__ __forceinline__ float warp_sum(float x) {
  for (int off = 16; off > 0; off /= 2)
    x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

// act(g) * u, act SiLU or GELU (tanh approximation), in float, every step rounded on its own
// (no contraction the compiler could choose differently in the two kernels that inline it).
__device__ __forceinline__ float gated(float g, float u, bool gelu_tanh) {
  float act;
  if (gelu_tanh) {
    const float k = 0.7978845608028654f; // sqrt(2 / pi)
    const float cube = __fmul_rn(__fmul_rn(__fmul_rn(0.044715f, g), g), g);
    const float inner = __fmul_rn(k, __fadd_rn(g, cube));
    act = __fmul_rn(__fmul_rn(0.5f, g), __fadd_rn(1.0f, tanhf(inner)));
  } else {
    act = __fdiv_rn(g, __fadd_rn(1.0f, expf(-g)));
  }
  return __fmul_rn(act, u);
}

// Eight bf16 of a 16-byte chunk, dotted in float.
__device__ __forceinline__ float dot8(const uint4& a, const uint4& b) {
  const __nv_bfloat162* pa = reinterpret_cast<const __nv_bfloat162*>(&a);
  const __nv_bfloat162* pb = reinterpret_cast<const __nv_bfloat162*>(&b);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 fa = __bfloat1622float2(pa[i]), fb = __bfloat1622float2(pb[i]);
    s = fmaf(fa.x, fb.x, s);
    s = fmaf(fa.y, fb.y, s);
  }
  return s;
}

// Weights are read once: no L1 allocation, so the activations (re-read by every warp) stay.
__device__ __forceinline__ uint4 load_streaming(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

} // namespace kvactor::kernels::cuda_detail
