// Prefill kernel for Hopper (sm_90a): warpgroup MMAs (wgmma). One CTA of two warpgroups per
// (128-query tile of a request, q head); each warpgroup owns 64 query rows. Grid x enumerates the
// tiles of all requests as the mma.sync kernel does (request r's tiles are
// x = query_start_loc[r] / 128 + r + i), walked from the last x down so that the longest causal
// tiles start first. K/V tiles of BN keys are double-buffered through cp.async (every thread
// loads a share, through the block table; keys no row sees are zero-filled) into the 128-byte
// swizzled layout of wgmma.cuh. Per tile a warpgroup computes S = Q K^T with Q and K from shared
// memory, the online softmax in registers, and O += P V with P from registers (the score
// accumulators, rounded to 16 bits, are exactly the A fragments) and V read transposed. A
// warpgroup skips the tiles none of its rows sees and masks only those its rows see in part.
// Same features as the mma.sync kernel: GQA, causal or not, sliding window, chunked local,
// soft-cap, sinks; 16-bit caches of head size 64, 128 or 256.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention_args.h"
#include "device_utils.cuh"
#include "launch_utils.cuh"
#include "wgmma.cuh"

namespace kvactor::kernels::cuda_detail {
namespace {

template <int D>
struct hopper_prefill_config {
  static constexpr int threads = 256; // two warpgroups
  static constexpr int bm = hopper_prefill_tile;
  static_assert(bm == 128);
  static constexpr int bn = D == 256 ? 64 : 128; // keys per tile
  static constexpr int n_o = D < 128 ? D : 128;  // output columns of one P V MMA
  static constexpr int o_parts = D / n_o;
  static constexpr size_t q_bytes = size_t{bm} * D * 2;
  static constexpr size_t tile_bytes = size_t{bn} * D * 2;
  // Q, then K and V of two stages; 1024 bytes of slack to align the swizzled tiles.
  static constexpr size_t smem_bytes = 1024 + q_bytes + 4 * tile_bytes;
};

/// The CTA's request and first query row, or false when it has no rows (see the file comment).
struct prefill_tile_of_cta {
  int r, q_begin, qlen, seq, q0, rows;
};
__device__ __forceinline__ bool find_prefill_tile(const attention_args& a, int x, int bm,
                                                  prefill_tile_of_cta* t) {
  int r = 0, hi_r = a.num_reqs - 1;
  while (r < hi_r) { // the largest r with query_start_loc[r] / bm + r <= x
    const int mid = (r + hi_r + 1) / 2;
    if (a.query_start_loc[mid] / bm + mid <= x)
      r = mid;
    else
      hi_r = mid - 1;
  }
  t->r = r;
  t->q_begin = a.query_start_loc[r];
  t->qlen = a.query_start_loc[r + 1] - t->q_begin;
  t->seq = a.seq_lens[r];
  t->q0 = (x - (t->q_begin / bm + r)) * bm;
  if (t->qlen <= 0 || t->seq < t->qlen || is_decode_request(t->qlen, a.group) || t->q0 >= t->qlen)
    return false;
  t->rows = min(bm, t->qlen - t->q0);
  return true;
}

template <class T, int D>
__device__ __forceinline__ void hopper_prefill_body(const attention_args& a) {
  using cfg = hopper_prefill_config<D>;
  using ops = mma_ops<T>;
  constexpr int bm = cfg::bm, bn = cfg::bn, chunks = D / 8, n_o = cfg::n_o;

  extern __shared__ __align__(16) unsigned char smem_raw[];
  const auto raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  unsigned char* const q_s = smem_raw + ((1024 - raw_addr % 1024) % 1024);
  unsigned char* const k_s = q_s + cfg::q_bytes; // [2] tiles
  unsigned char* const v_s = k_s + 2 * cfg::tile_bytes;

  prefill_tile_of_cta t;
  if (!find_prefill_tile(a, static_cast<int>(gridDim.x - 1 - blockIdx.x), bm, &t)) return;
  const int h = static_cast<int>(blockIdx.y);
  const int kvh = h / a.group;
  const int first_pos = t.seq - t.qlen + t.q0;
  const int lo = visible_range(a, first_pos, t.seq).lo;
  const int hi = visible_range(a, first_pos + t.rows - 1, t.seq).hi;

  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const T* const q = static_cast<const T*>(a.q);
  for (int c = tid; c < bm * chunks; c += cfg::threads) {
    const int rr = c / chunks, ch = c % chunks;
    const bool ok = rr < t.rows;
    const T* const src =
        q + (static_cast<int64_t>(t.q_begin + t.q0 + rr) * a.num_q_heads + h) * D + ch * 8;
    cp_async_16(q_s + sw128_offset(rr, ch, bm), ok ? src : q, ok);
  }

  const T* const cache = static_cast<const T*>(a.cache);
  const T* const head_base = cache + kvh * a.stride_head;
  const int32_t* const bt = a.block_table + static_cast<int64_t>(t.r) * a.width;
  auto load_kv = [&](int kt, int stage) {
    unsigned char* const ks = k_s + stage * cfg::tile_bytes;
    unsigned char* const vs = v_s + stage * cfg::tile_bytes;
#pragma unroll
    for (int i = 0; i < bn * chunks / cfg::threads; ++i) {
      const int c = tid + cfg::threads * i;
      const int rr = c / chunks, ch = c % chunks;
      const int key = kt * bn + rr;
      bool ok = key >= lo && key <= hi && key / a.block_size < a.width;
      const int blk = ok ? bt[key / a.block_size] : 0;
      ok = ok && blk >= 0 && blk < a.num_blocks;
      const T* const p = head_base + static_cast<int64_t>(ok ? blk : 0) * a.stride_block
                         + static_cast<int64_t>(key % a.block_size) * a.stride_token + ch * 8;
      const uint32_t off = sw128_offset(rr, ch, bn);
      cp_async_16(ks + off, ok ? p : cache, ok);
      cp_async_16(vs + off, ok ? p + a.v_offset : cache, ok);
    }
  };

  const int kt_first = lo / bn;
  const int n_tiles = hi / bn - kt_first + 1;
  load_kv(kt_first, 0);
  cp_async_commit(); // with Q

  // This warpgroup's rows [64 wg, 64 wg + 64) and the keys they see: [w_lo, w_hi] in all, and
  // [w_lo_max, w_hi_min] by every one of them. Uniform across the warpgroup, as wgmma requires.
  const int w_rows = max(0, min(64, t.rows - 64 * wg));
  int w_lo = 0, w_hi = -1, w_lo_max = 0, w_hi_min = -1;
  if (w_rows > 0) {
    const key_range first = visible_range(a, first_pos + 64 * wg, t.seq);
    const key_range last = visible_range(a, first_pos + 64 * wg + w_rows - 1, t.seq);
    w_lo = first.lo;
    w_hi = last.hi;
    w_lo_max = last.lo;
    w_hi_min = first.hi;
  }
  const int g = lane >> 2, t4 = lane & 3;
  softmax_rows sm;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int rr = 64 * wg + 16 * warp + g + 8 * i;
    sm.lo[i] = 1;
    sm.hi[i] = 0;
    if (rr < t.rows) {
      const key_range kr = visible_range(a, first_pos + rr, t.seq);
      sm.lo[i] = kr.lo;
      sm.hi[i] = kr.hi;
    }
  }

  float o[cfg::o_parts][n_o / 2];
#pragma unroll
  for (int p = 0; p < cfg::o_parts; ++p)
#pragma unroll
    for (int e = 0; e < n_o / 2; ++e)
      o[p][e] = 0.0f;
  float s[bn / 2];
#pragma unroll
  for (int e = 0; e < bn / 2; ++e)
    s[e] = 0.0f;
  const unsigned char* const q_wg = q_s + wg * 64 * 128;

  for (int it = 0; it < n_tiles; ++it) {
    if (it + 1 < n_tiles) load_kv(kt_first + it + 1, (it + 1) & 1);
    cp_async_commit();
    cp_async_wait<1>();
    fence_proxy_async();
    __syncthreads();
    const unsigned char* const ks = k_s + (it & 1) * cfg::tile_bytes;
    const unsigned char* const vs = v_s + (it & 1) * cfg::tile_bytes;
    const int k_start = (kt_first + it) * bn;
    const int k_end = k_start + bn - 1;
    if (k_end >= w_lo && k_start <= w_hi) {
      const bool need_mask = w_rows < 64 || k_start < w_lo_max || k_end > w_hi_min;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const uint32_t k_off = (kk % 4) * 32; // 16 columns inside a 64-column block
        const uint64_t da = sw128_descriptor(q_wg + (kk / 4) * bm * 128 + k_off, 16, 1024);
        const uint64_t db = sw128_descriptor(ks + (kk / 4) * bn * 128 + k_off, 16, 1024);
        wgmma_ops<bn, T>::ss(s, da, db, kk);
      }
      wgmma_commit();
      wgmma_wait<0>();

      float alpha[2];
      online_softmax_tile<bn / 8>(
          a, [&](int jj, int e) -> float& { return s[4 * jj + e]; }, k_start, t4, need_mask, sm,
          alpha);
#pragma unroll
      for (int p = 0; p < cfg::o_parts; ++p)
#pragma unroll
        for (int e = 0; e < n_o / 2; ++e)
          o[p][e] *= alpha[(e >> 1) & 1];
      uint32_t pa[bn / 16][4];
#pragma unroll
      for (int j = 0; j < bn / 16; ++j) {
        pa[j][0] = ops::pack(s[8 * j], s[8 * j + 1]);
        pa[j][1] = ops::pack(s[8 * j + 2], s[8 * j + 3]);
        pa[j][2] = ops::pack(s[8 * j + 4], s[8 * j + 5]);
        pa[j][3] = ops::pack(s[8 * j + 6], s[8 * j + 7]);
      }
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < bn / 16; ++j) {
#pragma unroll
        for (int p = 0; p < cfg::o_parts; ++p) {
          const uint64_t db = sw128_descriptor(vs + p * (n_o / 64) * bn * 128 + j * 16 * 128,
                                               static_cast<uint32_t>(bn * 128), 1024);
          wgmma_ops<n_o, T>::rs(o[p], pa[j], db, 1);
        }
      }
      wgmma_commit();
      wgmma_wait<0>();
    }
    __syncthreads();
  }
  cp_async_wait<0>();

  T* const out = static_cast<T*>(a.out);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int rr = 64 * wg + 16 * warp + g + 8 * i;
    const float sum = quad_sum(sm.l[i]);
    if (rr >= t.rows) continue;
    float acc_scale = 1.0f;
    const float inv = finish_row(a, h, sm.m[i], sum, &acc_scale) * acc_scale;
    T* const dst = out + (static_cast<int64_t>(t.q_begin + t.q0 + rr) * a.num_q_heads + h) * D;
#pragma unroll
    for (int p = 0; p < cfg::o_parts; ++p) {
#pragma unroll
      for (int j = 0; j < n_o / 8; ++j) {
        const uint32_t v = ops::pack(o[p][4 * j + 2 * i] * inv, o[p][4 * j + 2 * i + 1] * inv);
        *reinterpret_cast<uint32_t*>(dst + p * n_o + j * 8 + 2 * t4) = v;
      }
    }
  }
}

// Launched like the mma.sync kernel (see prefill_attention.cu): after the decode kernel, with
// PDL, computing at once and waiting for its predecessor only before exiting.
template <class T, class C, int D>
__global__ void __launch_bounds__(hopper_prefill_config<D>::threads, 1)
    hopper_prefill_kernel(const attention_args a) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  pdl_launch_dependents();
  hopper_prefill_body<T, D>(a);
  pdl_wait_for_predecessor();
#else
  __trap(); // the host launches it only on a 9.0 device of an sm_90a build
#endif
}

} // namespace

cuda_status launch_prefill_attention_hopper(const attention_args& a, bool bf16, dim3 grid, bool pdl,
                                            cudaStream_t stream) {
  auto launch = [&](auto type) {
    using T = typename decltype(type)::type;
    return dispatch_head_size("hopper prefill attention", a.head_size, [&](auto head_size) {
      constexpr int D = decltype(head_size)::value;
      if constexpr (D == 96) {
        return detail::invalid_cuda_argument("hopper prefill attention: head_size 96 is not "
                                             "instantiated");
      } else {
        using cfg = hopper_prefill_config<D>;
        return launch_kernel_with_smem(hopper_prefill_kernel<T, T, D>, grid, cfg::threads,
                                       cfg::smem_bytes, pdl, stream, a);
      }
    });
  };
  return dispatch_half_type(bf16, launch);
}

} // namespace kvactor::kernels::cuda_detail
