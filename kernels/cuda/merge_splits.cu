// Merge kernel of split-KV. Launched with PDL right after the split kernel: it lets the next
// kernel be scheduled, waits for the split kernel, then combines each row's splits (partial sum
// of p v, max in log2 units, sum of p) by their log-sum-exp weights, adds the sink to the
// denominator and writes the row. A split with no keys (sum 0) weighs 0.
//   by request (decode kernel): one CTA of 4 x v_size / 4 threads per 4 rows of a decode CTA
//     (grid: num_reqs, num_kv_heads * row_chunks, 4), one thread per (row, 4 dims);
//   by token (MLA kernel): one CTA of v_size / 4 threads per (token, q head).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention_args.h"
#include "device_utils.cuh"
#include "launch_utils.cuh"

namespace kvactor::kernels::cuda_detail {
namespace {

// The merged row `prow` (4 dims from col) with the sink of q head h, normalised. The splits are
// read in batches of 16 loads issued together, and nothing branches on a loaded value, so the
// loads do not wait for one another.
__device__ __forceinline__ float4 merge_row(const attention_args& a, int64_t prow, int h, int col) {
  constexpr int batch = 16;
  const int ns = a.num_splits;
  const float2* const ml = reinterpret_cast<const float2*>(a.partial_ml) + prow * ns;
  const float* const part = a.partial_out + prow * ns * a.v_size + col;
  float mx = -INFINITY;
  for (int s0 = 0; s0 < ns; s0 += batch) {
    float2 x[batch];
#pragma unroll
    for (int j = 0; j < batch; ++j)
      x[j] = ml[min(s0 + j, ns - 1)]; // unconditional loads: all in flight together
#pragma unroll
    for (int j = 0; j < batch; ++j) // a split with no keys has sum 0
      mx = fmaxf(mx, s0 + j < ns && x[j].y > 0.0f ? x[j].x : -INFINITY);
  }
  const float base = mx == -INFINITY ? 0.0f : mx;
  float sum = 0.0f;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int s0 = 0; s0 < ns; s0 += batch) {
    float2 x[batch];
    float4 o[batch];
#pragma unroll
    for (int j = 0; j < batch; ++j) {
      const int sj = min(s0 + j, ns - 1);
      x[j] = ml[sj];
      o[j] = *reinterpret_cast<const float4*>(part + static_cast<int64_t>(sj) * a.v_size);
    }
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

template <class T>
__device__ __forceinline__ void store4(const attention_args& a, int64_t out_row, int col,
                                       float4 v) {
  using ops = mma_ops<T>;
  uint2 packed;
  packed.x = ops::pack(v.x, v.y);
  packed.y = ops::pack(v.z, v.w);
  *reinterpret_cast<uint2*>(static_cast<T*>(a.out) + out_row * a.v_size + col) = packed;
}

// grid (num_reqs, num_kv_heads * row_chunks, 16 / merge_rows), merge_rows * v_size / 4 threads.
constexpr int merge_rows = 4;

template <class T>
__global__ void __launch_bounds__(512) merge_by_request_kernel(const attention_args a) {
  pdl_launch_dependents(); // the prefill kernel waits for our completion before it exits
  pdl_wait_for_predecessor();
  const int r = static_cast<int>(blockIdx.x);
  const int chunk = static_cast<int>(blockIdx.y) % a.row_chunks;
  const int kvh = static_cast<int>(blockIdx.y) / a.row_chunks;
  const int per_row = a.v_size / 4;
  const int rr =
      static_cast<int>(blockIdx.z) * merge_rows + static_cast<int>(threadIdx.x) / per_row;
  const int col = 4 * (static_cast<int>(threadIdx.x) % per_row);
  const int gr = chunk * decode_rows + rr;
  const int q_begin = a.query_start_loc[r];
  const int qlen = a.query_start_loc[r + 1] - q_begin;
  const int seq = a.seq_lens[r];
  // Only rows the decode kernel wrote (partials of other rows are never written).
  if (qlen <= 0 || seq < qlen || !is_decode_request(qlen, a.group) || gr >= qlen * a.group) return;
  const int h = kvh * a.group + gr % a.group;
  const int64_t prow = (static_cast<int64_t>(r) * gridDim.y + blockIdx.y) * decode_rows + rr;
  store4<T>(a, (static_cast<int64_t>(q_begin) + gr / a.group) * a.num_q_heads + h, col,
            merge_row(a, prow, h, col));
}

// grid (num_tokens, num_q_heads), v_size / 4 threads.
template <class T>
__global__ void __launch_bounds__(128) merge_by_token_kernel(const attention_args a) {
  pdl_launch_dependents();
  pdl_wait_for_predecessor();
  const int t = static_cast<int>(blockIdx.x);
  const int h = static_cast<int>(blockIdx.y);
  if (t >= a.query_start_loc[a.num_reqs]) return;
  const int r = request_of_token(a, t);
  if (a.seq_lens[r] < a.query_start_loc[r + 1] - a.query_start_loc[r]) return;
  const int64_t row = static_cast<int64_t>(t) * a.num_q_heads + h;
  const int col = 4 * static_cast<int>(threadIdx.x);
  store4<T>(a, row, col, merge_row(a, row, h, col));
}

template <class T>
cuda_status launch_typed(const attention_args& a, bool by_request, cudaStream_t stream) {
  const auto per_row = static_cast<unsigned>(a.v_size / 4);
  if (by_request) {
    const dim3 grid(static_cast<unsigned>(a.num_reqs),
                    static_cast<unsigned>(a.num_kv_heads * a.row_chunks), decode_rows / merge_rows);
    return launch_kernel(merge_by_request_kernel<T>, grid, merge_rows * per_row, 0, true, stream,
                         a);
  }
  const dim3 grid(static_cast<unsigned>(a.num_tokens), static_cast<unsigned>(a.num_q_heads));
  return launch_kernel(merge_by_token_kernel<T>, grid, per_row, 0, true, stream, a);
}

} // namespace

cuda_status launch_merge_splits(const attention_args& a, bool bf16, bool by_request,
                                cudaStream_t stream) {
  return dispatch_half_type(bf16, [&](auto type) {
    return launch_typed<typename decltype(type)::type>(a, by_request, stream);
  });
}

} // namespace kvactor::kernels::cuda_detail
