// Internal: the float arithmetic that the dense kernels share (decoder_ops.cu, skinny_gemm.cu),
// so that two kernels computing the same value give the same bits.
// Compiled as C++17 by nvcc.
#pragma once

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

} // namespace kvactor::kernels::cuda_detail
