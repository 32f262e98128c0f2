// Internal device helpers of the attention kernels: PTX wrappers (cp.async, ldmatrix,
// mma.sync m16n8k16), fast exp2/tanh, visibility ranges and request lookup, FP8 conversion.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "attention_args.h"

namespace kvactor::kernels::cuda_detail {

constexpr float log2e = 1.4426950408889634f;

/// 16 bytes global -> shared, asynchronous; zero-fills the destination when !valid (then src is
/// not read, but must still be a valid address).
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem),
               "r"(src_bytes)
               : "memory");
}

// Programmatic dependent launch (sm_90; no-ops for a kernel launched without it).
/// Lets the next kernel of the stream, launched with PDL, be scheduled once every CTA of this
/// grid has called this or exited.
__device__ __forceinline__ void pdl_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}
/// Waits until the preceding kernel of the stream has completed and its writes are visible.
__device__ __forceinline__ void pdl_wait_for_predecessor() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
/// Waits until at most N committed groups of this thread are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  const auto a = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) {
  const auto a = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* smem) {
  const auto a = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(a)
               : "memory");
}

/// Per element type: packing two floats into the operand register, and the tensor-core MMA
///   c[16x8] += a[16x16] * b[16x8]   (row.col, float accumulators)
template <class T>
struct mma_ops;

template <>
struct mma_ops<__nv_bfloat16> {
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    uint32_t u;
    __builtin_memcpy(&u, &v, 4);
    return u;
  }
  __device__ __forceinline__ static float2 unpack(uint32_t u) {
    __nv_bfloat162 v;
    __builtin_memcpy(&v, &u, 4);
    return __bfloat1622float2(v);
  }
  __device__ __forceinline__ static void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

template <>
struct mma_ops<__half> {
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    uint32_t u;
    __builtin_memcpy(&u, &v, 4);
    return u;
  }
  __device__ __forceinline__ static float2 unpack(uint32_t u) {
    __half2 v;
    __builtin_memcpy(&v, &u, 4);
    return __half22float2(v);
  }
  __device__ __forceinline__ static void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

/// 2^x; 0 for -inf.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float fast_tanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/// A raw score q . k in log2 units, scaled and soft-capped.
__device__ __forceinline__ float score_log2(const attention_args& a, float qk) {
  return a.softcap > 0.0f ? a.softcap_log2 * fast_tanh(qk * a.score_scale) : qk * a.score_scale;
}

/// The keys [lo, hi] visible to the query at position p of a sequence of seq tokens
/// (visible_keys of paged_attention.h).
struct key_range {
  int32_t lo, hi;
};
__device__ __forceinline__ key_range visible_range(const attention_args& a, int32_t p,
                                                   int32_t seq) {
  int32_t lo = 0;
  int32_t hi = a.causal ? p : seq - 1;
  if (a.sliding_window > 0) {
    lo = max(lo, p - a.sliding_window + 1);
    if (!a.causal) hi = min(hi, p + a.sliding_window - 1);
  }
  if (a.chunk_size > 0) {
    const int32_t begin = p / a.chunk_size * a.chunk_size;
    lo = max(lo, begin);
    hi = min(hi, begin + a.chunk_size - 1);
  }
  return {lo, hi};
}

/// The request of token t: the largest r < num_reqs with query_start_loc[r] <= t.
__device__ __forceinline__ int32_t request_of_token(const attention_args& a, int32_t t) {
  int32_t lo = 0, hi = a.num_reqs - 1;
  while (lo < hi) {
    const int32_t mid = (lo + hi + 1) / 2;
    if (a.query_start_loc[mid] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/// Max over the 4 threads of a quad (the threads that hold one accumulator row).
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/// How far (log2 units) a tile's max may pass a row's running max before a lazy online softmax
/// moves the running max: until then p = 2^(score - m) stays at most about 2^8, exact enough in 16
/// bits and in float sums, and the row's earlier accumulators keep their scale (alpha = 1).
constexpr float lazy_rescale_log2 = 8.0f;

/// Online softmax step for one accumulator row: `tile_max` is the row's max over the new
/// scores. Returns the subtrahend for exp2 of the new scores (0 while the row has seen no key)
/// and sets *alpha, the factor for the old accumulators. Lazy keeps the running max while the
/// tile's max passes it by at most lazy_rescale_log2 (alpha is then exactly 1).
template <bool Lazy = false>
__device__ __forceinline__ float online_rescale(float& m, float tile_max, float* alpha) {
  const float m_new = Lazy && tile_max <= m + lazy_rescale_log2 ? m : fmaxf(m, tile_max);
  const float base = m_new == -INFINITY ? 0.0f : m_new;
  *alpha = Lazy && m_new == m ? 1.0f : fast_exp2(m - base);
  m = m_new;
  return base;
}

/// A thread's two accumulator rows (row i: keys [lo[i], hi[i]] visible) and their online-softmax
/// state: running max m (log2 units; a lazy softmax lets it trail the true max by up to
/// lazy_rescale_log2) and sum l.
struct softmax_rows {
  int lo[2], hi[2];
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};
};

/// How online_softmax_tile turns raw scores q . k into log2 units.
enum class score_scaling {
  fused,  // exp2(qk * scale - max): one FFMA per score, the max taken on raw scores (scale > 0)
  scaled, // qk * scale first (a scale <= 0 reverses or flattens the order of raw scores)
  capped, // softcap_log2 * tanh(qk * scale) first
};

// online_softmax_tile for a compile-time scaling and masking: each variant is straight-line code
// (as predicated code, every element would pay for all of them).
template <int J, score_scaling Scaling, bool Mask, bool Lazy, class At>
__device__ __forceinline__ void online_softmax_tile_as(const attention_args& a, At& at, int k_start,
                                                       int t4, softmax_rows& rows,
                                                       float (&alpha)[2]) {
  const float scale = Scaling == score_scaling::fused ? a.score_scale : 1.0f;
  // Two partial maxima and sums per row (even and odd j): half the dependent chain.
  float tile_max[2][2] = {{-INFINITY, -INFINITY}, {-INFINITY, -INFINITY}};
#pragma unroll
  for (int j = 0; j < J; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = e >> 1;
      float v = at(j, e);
      if (Scaling == score_scaling::scaled) v *= a.score_scale;
      if (Scaling == score_scaling::capped) v = a.softcap_log2 * fast_tanh(v * a.score_scale);
      if (Mask) {
        const int key = k_start + j * 8 + 2 * t4 + (e & 1);
        if (key < rows.lo[i] || key > rows.hi[i]) v = -INFINITY;
      }
      at(j, e) = v;
      tile_max[j & 1][i] = fmaxf(tile_max[j & 1][i], v);
    }
  }
  float base[2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
    base[i] = online_rescale<Lazy>(
        rows.m[i], quad_max(fmaxf(tile_max[0][i], tile_max[1][i])) * scale, &alpha[i]);
  float sum[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
#pragma unroll
  for (int j = 0; j < J; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      at(j, e) = fast_exp2(fmaf(at(j, e), scale, -base[e >> 1]));
      sum[j & 1][e >> 1] += at(j, e);
    }
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
    rows.l[i] = rows.l[i] * alpha[i] + (sum[0][i] + sum[1][i]);
}

/// The keys a run of `n` consecutive query rows sees, the first at position `first`: [lo, hi] by
/// some row, [lo_max, hi_min] by every row (lo = 0, hi = -1 when n <= 0). A warp (mma.sync) or a
/// warpgroup (wgmma) skips the key tiles outside the first and masks only those not inside the
/// second.
struct rows_keys {
  int lo = 0, hi = -1, lo_max = 0, hi_min = -1;
};
__device__ __forceinline__ rows_keys keys_of_rows(const attention_args& a, int first, int n,
                                                  int seq) {
  rows_keys k;
  if (n > 0) {
    const key_range f = visible_range(a, first, seq);
    const key_range l = visible_range(a, first + n - 1, seq);
    k = {f.lo, l.hi, l.lo, f.hi};
  }
  return k;
}

/// The online-softmax state of a thread's two accumulator rows, tile rows r0 and r0 + 8 (query
/// positions first_pos + row); a row at or past `rows` sees no key.
__device__ __forceinline__ softmax_rows thread_rows(const attention_args& a, int first_pos, int r0,
                                                    int rows, int seq) {
  softmax_rows sm;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    sm.lo[i] = 1;
    sm.hi[i] = 0;
    if (r0 + 8 * i < rows) {
      const key_range kr = visible_range(a, first_pos + r0 + 8 * i, seq);
      sm.lo[i] = kr.lo;
      sm.hi[i] = kr.hi;
    }
  }
  return sm;
}

/// One tile of raw scores q . k in the m16n8 accumulator layout (mma.sync's, and each warp's part
/// of wgmma's): at(j, e) is row (e >> 1) of the thread's two, key k_start + 8 j + 2 t4 + (e & 1),
/// for j < J. Scales and caps the scores, masks keys a row does not see (only when need_mask),
/// updates the rows' max and sum, and leaves p = 2^(score - m) in place (m the running max).
/// Returns through alpha the factors for the rows' earlier accumulators. Lazy: see online_rescale.
template <int J, bool Lazy = false, class At>
__device__ __forceinline__ void online_softmax_tile(const attention_args& a, At&& at, int k_start,
                                                    int t4, bool need_mask, softmax_rows& rows,
                                                    float (&alpha)[2]) {
  using sc = score_scaling;
  if (a.softcap > 0.0f) {
    if (need_mask)
      online_softmax_tile_as<J, sc::capped, true, Lazy>(a, at, k_start, t4, rows, alpha);
    else
      online_softmax_tile_as<J, sc::capped, false, Lazy>(a, at, k_start, t4, rows, alpha);
  } else if (a.score_scale > 0.0f) {
    if (need_mask)
      online_softmax_tile_as<J, sc::fused, true, Lazy>(a, at, k_start, t4, rows, alpha);
    else
      online_softmax_tile_as<J, sc::fused, false, Lazy>(a, at, k_start, t4, rows, alpha);
  } else {
    if (need_mask)
      online_softmax_tile_as<J, sc::scaled, true, Lazy>(a, at, k_start, t4, rows, alpha);
    else
      online_softmax_tile_as<J, sc::scaled, false, Lazy>(a, at, k_start, t4, rows, alpha);
  }
}

/// Final normaliser of one row given its running max m (log2 units) and sum l, with the sink of
/// head h joining the denominator: out = acc * (*acc_scale) / denominator. Exact for a lazy,
/// trailing m too (acc and l share it). Returns 1 / denominator (0 for a row that saw nothing).
__device__ __forceinline__ float finish_row(const attention_args& a, int32_t h, float m, float l,
                                            float* acc_scale) {
  *acc_scale = 1.0f;
  if (a.sinks != nullptr) {
    const float sink = a.sinks[h] * log2e;
    const float m_final = fmaxf(m, sink);
    const float f = fast_exp2(m - m_final);
    l = l * f + fast_exp2(sink - m_final);
    *acc_scale = f;
  }
  return l > 0.0f ? a.out_scale / l : 0.0f;
}

/// Two FP8 E4M3 codes (the low 16 bits; element 0 the low byte) -> f16x2 of the same values
/// (exact: every E4M3 value is an f16 value).
__device__ __forceinline__ uint32_t fp8x2_to_f16x2(uint32_t two) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two & 0xffffu), __NV_E4M3);
  uint32_t u;
  __builtin_memcpy(&u, &h, 4);
  return u;
}

/// 16 FP8 E4M3 codes (one 16-byte chunk, element 0 in the lowest byte) -> the same 16 values as
/// f16.
__device__ __forceinline__ void fp8x16_to_f16(const uint4 in, uint4& lo, uint4& hi) {
  const uint32_t w[4] = {in.x, in.y, in.z, in.w};
  uint32_t r[8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
    r[i] = fp8x2_to_f16x2(w[i / 2] >> (16 * (i % 2)));
  lo = make_uint4(r[0], r[1], r[2], r[3]);
  hi = make_uint4(r[4], r[5], r[6], r[7]);
}

} // namespace kvactor::kernels::cuda_detail
