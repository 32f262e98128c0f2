// The dense kernels of decoder_cuda: embedding gather, residual add + weighted RMS norm, the
// q/k/v preparation (bias, per-head norm, RoPE, split to bf16), the gated activation, the logit
// soft-cap and the greedy argmax (the skinny GEMM of single-token steps is in skinny_gemm.cu).
// Each is one pass over rows that are independent of each other, so these kernels give a row the
// same result in any batch (the GEMMs of larger steps, cuBLAS, do not promise that: see
// decoder_cuda.h).
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>

#include "decoder_ops.h"
#include "dense_math.cuh"
#include "device_utils.cuh"
#include "launch_utils.cuh"

namespace kvactor::kernels::cuda_detail {
namespace {

constexpr int threads = 256;
constexpr int warps = threads / 32;

// The start of a kernel launched as a programmatic dependent (launch_dependent): wait for the
// previous kernel of the stream (its writes visible), then let the next one be scheduled. In that
// order, so that a dependent that reads before it waits (the prefill attention kernel) still
// sees everything before us complete; for a plain launch, both are no-ops.
__device__ __forceinline__ void pdl_start() {
  pdl_wait_for_predecessor();
  pdl_launch_dependents();
}

// Sum over a CTA of Threads threads; every thread gets the result. `scratch`: [Threads / 32]
// shared floats.
template <int Threads = threads>
__device__ __forceinline__ float cta_sum(float x, float* scratch) {
  for (int off = 16; off > 0; off /= 2)
    x += __shfl_xor_sync(0xffffffffu, x, off);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  __syncthreads(); // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < Threads / 32; ++w)
    total += scratch[w];
  return total;
}

__device__ __forceinline__ float norm_weight(const float* w, int i, bool one_plus) {
  return one_plus ? 1.0f + w[i] : w[i];
}

__global__ void __launch_bounds__(threads)
    embed_kernel(const __nv_bfloat16* embed, int32_t vocab, const int32_t* token_ids, int32_t dim,
                 float scale, float* hidden) {
  const int64_t t = blockIdx.x;
  const int32_t id = token_ids[t];
  const bool known = id >= 0 && id < vocab;
  const __nv_bfloat16* const row = embed + int64_t{known ? id : 0} * dim;
  for (int32_t c = static_cast<int32_t>(threadIdx.x); c < dim; c += threads)
    hidden[t * dim + c] = known ? __bfloat162float(row[c]) * scale : 0.0f;
}

// Any dimension: a strided loop over the row (the vectorised kernel below takes the rest).
__global__ void __launch_bounds__(threads) residual_norm_kernel(const residual_norm_args a) {
  pdl_start();
  __shared__ float scratch[warps];
  const int64_t r = blockIdx.x;
  float* const x = a.x + (a.rows != nullptr ? int64_t{a.rows[r]} : r) * a.dim;
  const int32_t first = static_cast<int32_t>(threadIdx.x);
  if (a.add != nullptr) {
    const float* const add = a.add + r * a.dim;
    float add_inv = 1.0f;
    if (a.add_weight != nullptr) {
      float s = 0.0f;
      for (int32_t c = first; c < a.dim; c += threads)
        s += add[c] * add[c];
      add_inv = rsqrtf(cta_sum(s, scratch) / static_cast<float>(a.dim) + a.eps);
    }
    for (int32_t c = first; c < a.dim; c += threads) {
      const float v = a.add_weight != nullptr
                          ? add[c] * add_inv * norm_weight(a.add_weight, c, a.one_plus)
                          : add[c];
      x[c] += v;
    }
  }
  if (a.out == nullptr) return;
  float s = 0.0f; // each thread reads back only the elements it wrote above
  for (int32_t c = first; c < a.dim; c += threads)
    s += x[c] * x[c];
  const float inv = rsqrtf(cta_sum(s, scratch) / static_cast<float>(a.dim) + a.eps);
  __nv_bfloat16* const out = static_cast<__nv_bfloat16*>(a.out) + r * a.dim;
  for (int32_t c = first; c < a.dim; c += threads)
    out[c] = __float2bfloat16_rn(x[c] * inv * norm_weight(a.weight, c, a.one_plus));
}

// A row per CTA, held in registers as V float4 per thread: each element is read once, with
// every load of the row in flight together (the strided loop waits on a load per element
// group, the whole step's longest chain of latencies at batch 1).
constexpr int norm_threads = 512;
constexpr int norm_max_vec = 8; // float4 per thread: dims up to 16384

__device__ __forceinline__ float4 norm_weight4(const float* w, int c4, bool one_plus) {
  float4 v = reinterpret_cast<const float4*>(w)[c4];
  if (one_plus) v = make_float4(1.0f + v.x, 1.0f + v.y, 1.0f + v.z, 1.0f + v.w);
  return v;
}

__device__ __forceinline__ float sum_sq(const float4& v) {
  return v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
}

template <int V>
__global__ void __launch_bounds__(norm_threads)
    residual_norm_vec_kernel(const residual_norm_args a) {
  pdl_start();
  __shared__ float scratch[norm_threads / 32];
  const int64_t r = blockIdx.x;
  const int n4 = a.dim / 4, tid = static_cast<int>(threadIdx.x);
  float4* const x =
      reinterpret_cast<float4*>(a.x + (a.rows != nullptr ? int64_t{a.rows[r]} : r) * a.dim);
  float4 v[V];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int c = tid + j * norm_threads;
    v[j] = c < n4 ? x[c] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  if (a.add != nullptr) {
    const float4* const add = reinterpret_cast<const float4*>(a.add + r * a.dim);
    float4 d[V];
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const int c = tid + j * norm_threads;
      d[j] = c < n4 ? add[c] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      s += sum_sq(d[j]);
    }
    float add_inv = 1.0f;
    if (a.add_weight != nullptr)
      add_inv = rsqrtf(cta_sum<norm_threads>(s, scratch) / static_cast<float>(a.dim) + a.eps);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const int c = tid + j * norm_threads;
      if (c >= n4) continue;
      if (a.add_weight != nullptr) {
        const float4 w = norm_weight4(a.add_weight, c, a.one_plus);
        d[j] = make_float4(d[j].x * add_inv * w.x, d[j].y * add_inv * w.y, d[j].z * add_inv * w.z,
                           d[j].w * add_inv * w.w);
      }
      v[j] = make_float4(v[j].x + d[j].x, v[j].y + d[j].y, v[j].z + d[j].z, v[j].w + d[j].w);
      x[c] = v[j];
    }
  }
  if (a.out == nullptr) return;
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < V; ++j)
    s += sum_sq(v[j]);
  const float inv = rsqrtf(cta_sum<norm_threads>(s, scratch) / static_cast<float>(a.dim) + a.eps);
  uint2* const out = reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(a.out) + r * a.dim);
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int c = tid + j * norm_threads;
    if (c >= n4) continue;
    const float4 w = norm_weight4(a.weight, c, a.one_plus);
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v[j].x * inv * w.x, v[j].y * inv * w.y);
    const __nv_bfloat162 hi = __floats2bfloat162_rn(v[j].z * inv * w.z, v[j].w * inv * w.w);
    out[c] = make_uint2(*reinterpret_cast<const uint32_t*>(&lo),
                        *reinterpret_cast<const uint32_t*>(&hi));
  }
}

// A CTA per (token, group of prep_warps heads), a warp per head (grid-striding over the groups
// when there are more than the grid's y); lane holds dims lane + 32 j of its head. Spreading the
// heads over CTAs keeps a single-token step from running 48 heads one after another.
constexpr int prep_warps = 4;
constexpr int max_head_dim = 256;

// The cache element where KV head kvh of token t begins, or -1 when nothing is stored (the store
// is off, or the token has no slot in the cache): found once per head, not per element.
__device__ __forceinline__ int64_t kv_entry(const qkv_prepare_args& a, int64_t t, int kvh) {
  const kv_store& k = a.store;
  if (k.cache == nullptr) return -1;
  const int64_t slot = k.slot_mapping[t];
  if (slot < 0 || slot >= k.capacity) return -1;
  return slot / k.block_size * k.stride_block + kvh * k.stride_head
         + slot % k.block_size * k.stride_token;
}

// Stores element e (its bf16 value) of K, or of V after head_dim elements, into the entry that
// begins at `entry` (kv_entry; -1: nothing).
__device__ __forceinline__ void store_kv(const qkv_prepare_args& a, int64_t entry, bool is_v, int e,
                                         __nv_bfloat16 value) {
  if (entry < 0) return;
  const kv_store& k = a.store;
  const int64_t at = entry + (is_v ? a.head_dim : 0) + e;
  if (k.fp8) // the code of the bf16 value, as the KV write quantises it
    static_cast<unsigned char*>(k.cache)[at] =
        __nv_cvt_float_to_fp8(__fdiv_rn(__bfloat162float(value), is_v ? k.v_scale : k.k_scale),
                              __NV_SATFINITE, __NV_E4M3);
  else
    static_cast<__nv_bfloat16*>(k.cache)[at] = value;
}

__global__ void __launch_bounds__(prep_warps * 32) qkv_prepare_kernel(const qkv_prepare_args a) {
  pdl_start();
  __shared__ float row[prep_warps][max_head_dim];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t t = blockIdx.x;
  const int d = a.head_dim, per_lane = d / 32, half = a.rot_dim / 2;
  const int heads = a.q_heads + 2 * a.kv_heads;
  const float* const src = a.qkv + t * int64_t{heads} * d;
  const float pos = static_cast<float>(a.positions[t]);
  float* const buf = row[warp];
  for (int h = static_cast<int>(blockIdx.y) * prep_warps + warp; h < heads;
       h += static_cast<int>(gridDim.y) * prep_warps) {
    const bool is_q = h < a.q_heads, is_k = !is_q && h < a.q_heads + a.kv_heads;
    float v[max_head_dim / 32];
    float ss = 0.0f;
    for (int j = 0; j < per_lane; ++j) {
      const int e = lane + 32 * j;
      v[j] = src[h * d + e] + (a.bias != nullptr ? a.bias[h * d + e] : 0.0f);
      ss += v[j] * v[j];
    }
    const float* const w = is_q ? a.q_norm : a.k_norm;
    if (!is_q && !is_k) { // v: bias and round
      const int kvh = h - a.q_heads - a.kv_heads;
      __nv_bfloat16* const out = static_cast<__nv_bfloat16*>(a.v) + (t * a.kv_heads + kvh) * d;
      const int64_t entry = kv_entry(a, t, kvh);
      for (int j = 0; j < per_lane; ++j) {
        const __nv_bfloat16 y = __float2bfloat16_rn(v[j]);
        out[lane + 32 * j] = y;
        store_kv(a, entry, true, lane + 32 * j, y);
      }
      continue;
    }
    if (w != nullptr) {
      const float inv = rsqrtf(warp_sum(ss) / static_cast<float>(d) + a.eps);
      for (int j = 0; j < per_lane; ++j)
        v[j] *= inv * norm_weight(w, lane + 32 * j, a.one_plus);
    }
    for (int j = 0; j < per_lane; ++j)
      buf[lane + 32 * j] = v[j];
    __syncwarp();
    __nv_bfloat16* const out =
        is_q ? static_cast<__nv_bfloat16*>(a.q) + (t * a.q_heads + h) * d
             : static_cast<__nv_bfloat16*>(a.k) + (t * a.kv_heads + (h - a.q_heads)) * d;
    const int64_t entry = is_k ? kv_entry(a, t, h - a.q_heads) : -1;
    for (int j = 0; j < per_lane; ++j) {
      const int e = lane + 32 * j;
      float y = v[j];
      if (e < a.rot_dim) {
        const int i = e < half ? e : e - half;
        float sn, cs;
        sincosf(pos * a.inv_freq[i], &sn, &cs);
        y = e < half ? v[j] * cs - buf[e + half] * sn : v[j] * cs + buf[e - half] * sn;
      }
      const __nv_bfloat16 yb = __float2bfloat16_rn(y);
      out[e] = yb;
      store_kv(a, entry, false, e, yb);
    }
    __syncwarp(); // buf is rewritten by the next head
  }
}

__global__ void __launch_bounds__(threads)
    gated_activation_kernel(const float* gate_up, int64_t total, int32_t inter, bool gelu_tanh,
                            __nv_bfloat16* out) {
  pdl_start();
  for (int64_t e = blockIdx.x * int64_t{threads} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * threads) {
    const int64_t t = e / inter, i = e % inter;
    out[e] = __float2bfloat16_rn(
        gated(gate_up[t * 2 * inter + i], gate_up[t * 2 * inter + inter + i], gelu_tanh));
  }
}

__global__ void __launch_bounds__(threads) softcap_kernel(float* x, int64_t n, float cap) {
  for (int64_t e = blockIdx.x * int64_t{threads} + threadIdx.x; e < n;
       e += int64_t{gridDim.x} * threads)
    x[e] = cap * tanhf(x[e] / cap);
}

// sampler.cpp's keyed_uniform, on the device: the same integer steps, the same double.
__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

__device__ __forceinline__ double keyed_uniform(uint64_t seed, uint64_t counter) {
  const uint64_t bits = splitmix64(splitmix64(seed) ^ counter);
  return __dmul_rn(static_cast<double>(bits >> 11), 0x1.0p-53);
}

// Rounded step by step as the CPU computes it (no fused multiply-add), so the values are the
// CPU's bits.
__global__ void __launch_bounds__(threads)
    fill_generated_kernel(void* dst, bool bf16, int64_t rows, int64_t cols, int64_t row_begin,
                          int64_t col_begin, int64_t width, uint64_t key, float scale,
                          float centre) {
  const int64_t total = rows * cols;
  for (int64_t e = blockIdx.x * int64_t{threads} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * threads) {
    const int64_t r = e / cols, c = e % cols;
    const auto i = static_cast<uint64_t>((row_begin + r) * width + col_begin + c);
    const auto g = static_cast<float>(__dadd_rn(__dmul_rn(2.0, keyed_uniform(key, i)), -1.0));
    const float v = __fadd_rn(centre, __fmul_rn(scale, g));
    if (bf16)
      static_cast<__nv_bfloat16*>(dst)[e] = __float2bfloat16_rn(v);
    else
      static_cast<float*>(dst)[e] = v;
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

unsigned grid_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + threads - 1) / threads, 1, 16384));
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// Whether the rows can be read as float4 (and written as 4 bf16 at a time).
bool vectorisable(const residual_norm_args& a) {
  return a.dim % 4 == 0 && aligned16(a.x) && aligned16(a.add) && aligned16(a.add_weight)
         && aligned16(a.weight) && reinterpret_cast<uintptr_t>(a.out) % 8 == 0;
}

} // namespace

cuda_status launch_embed(const void* embed, int32_t vocab, const int32_t* token_ids,
                         int32_t num_tokens, int32_t dim, float scale, float* hidden,
                         cudaStream_t stream) {
  if (num_tokens == 0) return {};
  embed_kernel<<<static_cast<unsigned>(num_tokens), threads, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(embed), vocab, token_ids, dim, scale, hidden);
  KVACTOR_CUDA_CALL(cudaGetLastError());
  return {};
}

cuda_status launch_residual_norm(const residual_norm_args& a, cudaStream_t stream) {
  if (a.num_rows == 0) return {};
  const auto grid = static_cast<unsigned>(a.num_rows);
  const int vec = (a.dim / 4 + norm_threads - 1) / norm_threads;
  if (!vectorisable(a) || vec > norm_max_vec) {
    KVACTOR_CUDA_CALL(launch_dependent(residual_norm_kernel, grid, threads, stream, a));
  } else {
    auto* kernel = vec == 1   ? residual_norm_vec_kernel<1>
                   : vec == 2 ? residual_norm_vec_kernel<2>
                   : vec <= 4 ? residual_norm_vec_kernel<4>
                              : residual_norm_vec_kernel<8>;
    KVACTOR_CUDA_CALL(launch_dependent(kernel, grid, norm_threads, stream, a));
  }
  return {};
}

cuda_status launch_qkv_prepare(const qkv_prepare_args& a, cudaStream_t stream) {
  if (a.num_tokens == 0) return {};
  KVACTOR_CUDA_CHECK_ARG(a.head_dim % 32 == 0 && a.head_dim <= max_head_dim,
                         "qkv_prepare: head_dim ", a.head_dim,
                         " is not a multiple of 32 up to 256");
  KVACTOR_CUDA_CHECK_ARG(a.rot_dim % 2 == 0 && a.rot_dim <= a.head_dim, "qkv_prepare: rot_dim ",
                         a.rot_dim, " is not even and at most head_dim ", a.head_dim);
  const int heads = a.q_heads + 2 * a.kv_heads;
  const dim3 grid(static_cast<unsigned>(a.num_tokens),
                  static_cast<unsigned>(std::min((heads + prep_warps - 1) / prep_warps, 65535)));
  KVACTOR_CUDA_CALL(launch_dependent(qkv_prepare_kernel, grid, prep_warps * 32, stream, a));
  return {};
}

cuda_status launch_gated_activation(const float* gate_up, int32_t num_tokens, int32_t inter,
                                    bool gelu_tanh, void* out, cudaStream_t stream) {
  const int64_t total = int64_t{num_tokens} * inter;
  if (total == 0) return {};
  KVACTOR_CUDA_CALL(launch_dependent(gated_activation_kernel, dim3(grid_for(total)), threads,
                                     stream, gate_up, total, inter, gelu_tanh,
                                     static_cast<__nv_bfloat16*>(out)));
  return {};
}

cuda_status launch_fill_generated(void* dst, bool bf16, int64_t rows, int64_t cols,
                                  int64_t row_begin, int64_t col_begin, int64_t width, uint64_t key,
                                  float scale, float centre, cudaStream_t stream) {
  const int64_t total = rows * cols;
  if (total == 0) return {};
  fill_generated_kernel<<<grid_for(total), threads, 0, stream>>>(
      dst, bf16, rows, cols, row_begin, col_begin, width, key, scale, centre);
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

cuda_status launch_softcap(float* logits, int64_t count, float cap, cudaStream_t stream) {
  if (count == 0) return {};
  softcap_kernel<<<grid_for(count), threads, 0, stream>>>(logits, count, cap);
  KVACTOR_CUDA_CALL(cudaGetLastError());
  return {};
}

} // namespace kvactor::kernels::cuda_detail
