// Internal: the combination of split-KV partial results, shared by the decode kernel (its last
// CTA of a row group merges) and the MLA merge kernel. Compiled as C++17 by nvcc.
#pragma once

#include "attention_args.h"
#include "device_utils.cuh"

namespace kvactor::kernels::cuda_detail {

// The merged row `prow` (4 dims from col) with the sink of q head h, normalised. One pass: the
// splits are read in batches of 16 whose loads are all issued together (nothing branches on a
// loaded value), and each batch rescales what the earlier ones summed, so up to 16 splits cost
// one round trip to L2.
__device__ __forceinline__ float4 merge_row(const attention_args& a, int64_t prow, int h, int col) {
  constexpr int batch = 16;
  const int ns = a.num_splits;
  const float2* const ml = reinterpret_cast<const float2*>(a.partial_ml) + prow * ns;
  const float* const part = a.partial_out + prow * ns * a.v_size + col;
  float mx = -INFINITY;
  float sum = 0.0f;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int s0 = 0; s0 < ns; s0 += batch) {
    float2 x[batch];
    float4 o[batch];
#pragma unroll
    for (int j = 0; j < batch; ++j) {
      const int sj = min(s0 + j, ns - 1);
      // L2 loads: other CTAs of the same kernel may have written these (decode's fused merge).
      x[j] = __ldcg(ml + sj);
      o[j] = __ldcg(reinterpret_cast<const float4*>(part + static_cast<int64_t>(sj) * a.v_size));
    }
    float batch_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < batch; ++j) // a split with no keys has sum 0
      batch_max = fmaxf(batch_max, s0 + j < ns && x[j].y > 0.0f ? x[j].x : -INFINITY);
    const float next = fmaxf(mx, batch_max);
    const float base = next == -INFINITY ? 0.0f : next;
    const float keep = mx == -INFINITY ? 0.0f : fast_exp2(mx - base); // what was summed so far
    mx = next;
    sum *= keep;
    acc = make_float4(acc.x * keep, acc.y * keep, acc.z * keep, acc.w * keep);
#pragma unroll
    for (int j = 0; j < batch; ++j) {
      const float w = fast_exp2(s0 + j < ns && x[j].y > 0.0f ? x[j].x - base : -INFINITY);
      sum += w * x[j].y;
      acc.x += w * o[j].x;
      acc.y += w * o[j].y;
      acc.z += w * o[j].z;
      acc.w += w * o[j].w;
    }
  }
  float acc_scale = 1.0f;
  const float inv = finish_row(a, h, mx, sum, &acc_scale) * acc_scale;
  return make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
}

/// Writes 4 dims of output row out_row from col, packed into T.
template <class T>
__device__ __forceinline__ void store4(const attention_args& a, int64_t out_row, int col,
                                       float4 v) {
  using ops = mma_ops<T>;
  uint2 packed;
  packed.x = ops::pack(v.x, v.y);
  packed.y = ops::pack(v.z, v.w);
  *reinterpret_cast<uint2*>(static_cast<T*>(a.out) + out_row * a.v_size + col) = packed;
}

} // namespace kvactor::kernels::cuda_detail
