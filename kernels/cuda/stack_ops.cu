// The dense kernels of attention_stack_cuda: synthetic weights and embedding, residual add + RMS
// norm, RoPE + split into the attention's q/k/v, and the greedy argmax. Every kernel is one pass
// over rows that are independent of each other.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>

#include "kvactor/kernels/cuda/synthetic_weights_cuda.h"
#include "stack_ops.h"
#include "synthetic_weights.cuh"

namespace kvactor::kernels::cuda_detail {
namespace {

constexpr int threads = 256;
constexpr int warps = threads / 32;
constexpr int64_t max_grid = 16384; // grid-stride kernels: enough CTAs to fill any GPU

// Element type of the bf16 flag.
template <class T>
__device__ __forceinline__ T round_to(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 round_to<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half round_to<__half>(float x) {
  return __float2half_rn(x);
}

unsigned grid_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + threads - 1) / threads, 1, max_grid));
}

// Sum over the CTA; every thread gets the result. `scratch`: [warps] shared floats.
__device__ __forceinline__ float block_sum(float x, float* scratch) {
  for (int off = 16; off > 0; off /= 2)
    x += __shfl_xor_sync(0xffffffffu, x, off);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < warps; ++w)
    total += scratch[w];
  return total;
}

template <class T>
__global__ void __launch_bounds__(threads) weight_slice_kernel(const weight_slice_args a) {
  T* const dst = static_cast<T*>(a.dst);
  const int64_t total = int64_t{a.ins} * a.outs;
  for (int64_t e = blockIdx.x * int64_t{threads} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * threads) {
    const int64_t o = e / a.ins, i = e % a.ins;
    const float w =
        synthetic_uniform_hd(a.seed, a.matrix, a.layer, a.row_begin + i, a.col_begin + o);
    dst[e] = round_to<T>(__fmul_rn(w, a.scale));
  }
}

__global__ void __launch_bounds__(threads)
    synthetic_kernel(const synthetic_coord* coords, int64_t n, float* out) {
  for (int64_t e = blockIdx.x * int64_t{threads} + threadIdx.x; e < n;
       e += int64_t{gridDim.x} * threads) {
    const synthetic_coord c = coords[e];
    out[e] = synthetic_uniform_hd(c.seed, static_cast<uint64_t>(c.matrix), c.layer, c.row, c.col);
  }
}

__global__ void __launch_bounds__(threads)
    embedding_kernel(float* hidden, const int32_t* token_ids, int32_t dim, uint64_t seed) {
  const int64_t t = blockIdx.x;
  const int64_t token = token_ids[t];
  for (int32_t c = static_cast<int32_t>(threadIdx.x); c < dim; c += threads)
    hidden[t * dim + c] = synthetic_uniform_hd(seed, 1 /* weight_matrix::embedding */, 0, token, c);
}

template <class T>
__global__ void __launch_bounds__(threads) add_norm_kernel(const add_norm_args a) {
  __shared__ float scratch[warps];
  const int64_t r = blockIdx.x;
  float* const x = a.x + (a.rows != nullptr ? int64_t{a.rows[r]} : r) * a.dim;
  float sum = 0.0f;
  for (int32_t c = static_cast<int32_t>(threadIdx.x); c < a.dim; c += threads) {
    float v = x[c];
    if (a.add != nullptr) {
      v += a.add[r * a.dim + c];
      x[c] = v;
    }
    sum += v * v;
  }
  if (a.out == nullptr) return;
  sum = block_sum(sum, scratch);
  const float inv = 1.0f / sqrtf(sum / static_cast<float>(a.dim) + a.eps);
  T* const out = static_cast<T*>(a.out) + r * a.dim;
  // Each thread reads back only the elements it wrote above.
  for (int32_t c = static_cast<int32_t>(threadIdx.x); c < a.dim; c += threads)
    out[c] = round_to<T>(x[c] * inv);
}

template <class T>
__global__ void __launch_bounds__(threads) rope_split_kernel(const rope_split_args a) {
  extern __shared__ float trig[]; // [half] cos, then [half] sin
  const int64_t t = blockIdx.x;
  const int32_t half = a.rope_dim / 2;
  float* const cos_v = trig;
  float* const sin_v = trig + half;
  if (half > 0) {
    const double pos = a.positions[t];
    for (int32_t i = static_cast<int32_t>(threadIdx.x); i < half; i += threads) {
      const double inv_freq =
          pow(static_cast<double>(a.theta), -2.0 * i / static_cast<double>(a.rope_dim));
      double s = 0.0, c = 0.0;
      sincos(pos * inv_freq, &s, &c);
      cos_v[i] = static_cast<float>(c);
      sin_v[i] = static_cast<float>(s);
    }
    __syncthreads();
  }
  const float* const row = a.qkv + t * a.ld;
  const int32_t q_cols = a.q_heads * a.head_size;
  const int32_t k_cols = a.kv_heads * a.head_size;
  const int32_t v_cols = a.kv_heads * a.v_size;
  for (int32_t e = static_cast<int32_t>(threadIdx.x); e < q_cols + k_cols + v_cols; e += threads) {
    float y = row[e];
    if (e < q_cols + k_cols) {
      // Rotate halves, with the products rounded as the CPU rounds them (no FMA contraction).
      const int32_t rel = e % a.head_size - a.rope_offset;
      if (rel >= 0 && rel < half)
        y = __fsub_rn(__fmul_rn(y, cos_v[rel]), __fmul_rn(row[e + half], sin_v[rel]));
      else if (rel >= half && rel < a.rope_dim)
        y = __fadd_rn(__fmul_rn(y, cos_v[rel - half]), __fmul_rn(row[e - half], sin_v[rel - half]));
    }
    if (e < q_cols)
      static_cast<T*>(a.q)[t * q_cols + e] = round_to<T>(y);
    else if (e < q_cols + k_cols)
      static_cast<T*>(a.k)[t * k_cols + (e - q_cols)] = round_to<T>(y);
    else
      static_cast<T*>(a.v)[t * v_cols + (e - q_cols - k_cols)] = round_to<T>(y);
  }
}

// The better of two (value, index) candidates: the larger value, the lower index on a tie.
__device__ __forceinline__ void take_better(float& v, int32_t& i, float ov, int32_t oi) {
  if (ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}

__global__ void __launch_bounds__(threads)
    argmax_kernel(const float* logits, int32_t vocab, int32_t* tokens) {
  __shared__ float best_v[warps];
  __shared__ int32_t best_i[warps];
  const int64_t r = blockIdx.x;
  const float* const row = logits + r * vocab;
  float v = -INFINITY;
  int32_t idx = INT_MAX;
  for (int32_t c = static_cast<int32_t>(threadIdx.x); c < vocab; c += threads)
    take_better(v, idx, row[c], c);
  for (int off = 16; off > 0; off /= 2)
    take_better(v, idx, __shfl_xor_sync(0xffffffffu, v, off),
                __shfl_xor_sync(0xffffffffu, idx, off));
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  if (lane == 0) {
    best_v[warp] = v;
    best_i[warp] = idx;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  v = best_v[0];
  idx = best_i[0];
  for (int w = 1; w < warps; ++w)
    take_better(v, idx, best_v[w], best_i[w]);
  tokens[r] = idx == INT_MAX ? 0 : idx; // every logit NaN: the first index, as max_element
}

} // namespace

cuda_status launch_weight_slice(const weight_slice_args& a, cudaStream_t stream) {
  const int64_t total = int64_t{a.ins} * a.outs;
  if (total == 0) return {};
  if (a.bf16)
    weight_slice_kernel<__nv_bfloat16><<<grid_for(total), threads, 0, stream>>>(a);
  else
    weight_slice_kernel<__half><<<grid_for(total), threads, 0, stream>>>(a);
  KVACTOR_CUDA_CALL(cudaGetLastError());
  return {};
}

cuda_status launch_embedding(float* hidden, const int32_t* token_ids, int32_t num_tokens,
                             int32_t dim, uint64_t seed, cudaStream_t stream) {
  if (num_tokens == 0) return {};
  embedding_kernel<<<static_cast<unsigned>(num_tokens), threads, 0, stream>>>(hidden, token_ids,
                                                                              dim, seed);
  KVACTOR_CUDA_CALL(cudaGetLastError());
  return {};
}

cuda_status launch_add_norm(const add_norm_args& a, cudaStream_t stream) {
  if (a.num_rows == 0) return {};
  const auto grid = static_cast<unsigned>(a.num_rows);
  if (a.bf16)
    add_norm_kernel<__nv_bfloat16><<<grid, threads, 0, stream>>>(a);
  else
    add_norm_kernel<__half><<<grid, threads, 0, stream>>>(a);
  KVACTOR_CUDA_CALL(cudaGetLastError());
  return {};
}

cuda_status launch_rope_split(const rope_split_args& a, cudaStream_t stream) {
  if (a.num_tokens == 0) return {};
  const auto grid = static_cast<unsigned>(a.num_tokens);
  const size_t smem = static_cast<size_t>(a.rope_dim) * sizeof(float);
  if (a.bf16)
    rope_split_kernel<__nv_bfloat16><<<grid, threads, smem, stream>>>(a);
  else
    rope_split_kernel<__half><<<grid, threads, smem, stream>>>(a);
  KVACTOR_CUDA_CALL(cudaGetLastError());
  return {};
}

cuda_status launch_argmax(const float* logits, int32_t num_rows, int32_t vocab, int32_t* tokens,
                          cudaStream_t stream) {
  if (num_rows == 0) return {};
  argmax_kernel<<<static_cast<unsigned>(num_rows), threads, 0, stream>>>(logits, vocab, tokens);
  KVACTOR_CUDA_CALL(cudaGetLastError());
  return {};
}

} // namespace kvactor::kernels::cuda_detail

namespace kvactor::kernels {

cuda_status synthetic_uniform_cuda(const synthetic_coord* coords, int64_t n, float* out,
                                   cudaStream_t stream) {
  KVACTOR_CUDA_CHECK_ARG(n >= 0, "synthetic_uniform_cuda: n: ", n, " is negative");
  if (n == 0) return {};
  KVACTOR_CUDA_CHECK_ARG(coords != nullptr, "synthetic_uniform_cuda: coords: is null");
  KVACTOR_CUDA_CHECK_ARG(out != nullptr, "synthetic_uniform_cuda: out: is null");
  cuda_detail::synthetic_kernel<<<cuda_detail::grid_for(n), cuda_detail::threads, 0, stream>>>(
      coords, n, out);
  KVACTOR_CUDA_CALL(cudaGetLastError());
  return {};
}

} // namespace kvactor::kernels
