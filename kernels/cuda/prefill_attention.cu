// Prefill kernel (FlashAttention-2 style): one CTA of 4 warps per (64-query tile of a request,
// q head). Grid x enumerates the tiles of all requests without a host copy of query_start_loc:
// request r's tiles are x = query_start_loc[r] / 64 + r + i, a strictly increasing map, so a CTA
// finds its request by binary search and returns when x falls between two requests' tiles. K/V
// tiles of BN keys are double-buffered through cp.async; each warp owns 16 query rows and runs
// S = Q K^T and O += P V on the tensor cores with an online softmax. Only the key tiles that some
// row sees are loaded (causal, window and chunk skipping); a warp skips the tiles none of its
// rows sees, and masks only the tiles its rows see in part. With an FP8 cache the MMAs run in
// f16: Q is converted once in place, each K/V tile lands in byte-wide staging and is converted
// (exactly: every E4M3 value is an f16 value); the scales apply to the scores (k_scale) and the
// output (v_scale).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "attention_args.h"
#include "device_utils.cuh"
#include "launch_utils.cuh"

namespace kvactor::kernels::cuda_detail {
namespace {

// C: the cache's element type (T, or __nv_fp8_e4m3).
template <int D, class C>
struct prefill_config {
  static constexpr bool fp8 = sizeof(C) == 1;
  static constexpr int warps = 4;
  static constexpr int threads = warps * 32;
  static constexpr int bm = prefill_tile;
  static_assert(bm == warps * 16);
  static constexpr int bn = D <= 128 ? 64 : 32;          // keys per tile
  static constexpr int row = D + 8;                      // 16-bit elements
  static constexpr int load_row = fp8 ? D + 16 : row;    // cache elements per loaded row
  static constexpr int chunks = D * int{sizeof(C)} / 16; // 16-byte chunks per cache row
  // Q [bm][row], K [2][bn][load_row], V [2][bn][load_row] of C; FP8: K, V [bn][row] in 16 bits.
  static constexpr size_t smem_bytes = 2 * size_t{row} * bm + 4 * size_t{bn} * load_row * sizeof(C)
                                       + (fp8 ? 2 * 2 * size_t{bn} * row : 0);
};

template <class T, class C, int D>
__device__ __forceinline__ void prefill_attention_body(const attention_args& a) {
  using cfg = prefill_config<D, C>;
  using mma_t = std::conditional_t<cfg::fp8, __half, T>; // FP8: f16 MMAs
  using ops = mma_ops<mma_t>;
  using out_ops = mma_ops<T>;
  constexpr int row = cfg::row, bm = cfg::bm, bn = cfg::bn, load_row = cfg::load_row;
  constexpr int chunks = D / 8; // 16-byte chunks of a 16-bit row
  constexpr int c_chunks = cfg::chunks;
  constexpr int per_chunk = 16 / int{sizeof(C)};

  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* const q_s = reinterpret_cast<T*>(smem_raw);
  C* const k_s = reinterpret_cast<C*>(q_s + bm * row); // [2][bn][load_row]
  C* const v_s = k_s + 2 * bn * load_row;
  __half* const k_conv = reinterpret_cast<__half*>(v_s + 2 * bn * load_row); // FP8: [bn][row]
  __half* const v_conv = k_conv + bn * row;

  // Which request and tile: the largest r with query_start_loc[r] / bm + r <= x.
  const int x = static_cast<int>(blockIdx.x);
  int r = 0;
  {
    int hi_r = a.num_reqs - 1;
    while (r < hi_r) {
      const int mid = (r + hi_r + 1) / 2;
      if (a.query_start_loc[mid] / bm + mid <= x)
        r = mid;
      else
        hi_r = mid - 1;
    }
  }
  const int q_begin = a.query_start_loc[r];
  const int qlen = a.query_start_loc[r + 1] - q_begin;
  const int seq = a.seq_lens[r];
  const int q0 = (x - (q_begin / bm + r)) * bm;
  if (qlen <= 0 || seq < qlen || is_decode_request(qlen, a.group) || q0 >= qlen) return;
  const int rows = min(bm, qlen - q0);
  const int h = static_cast<int>(blockIdx.y);
  const int kvh = h / a.group;
  const int first_pos = seq - qlen + q0;
  const int lo = visible_range(a, first_pos, seq).lo;
  const int hi = visible_range(a, first_pos + rows - 1, seq).hi;

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, lane = tid % 32;
  const T* const q = static_cast<const T*>(a.q);
  for (int c = tid; c < bm * chunks; c += cfg::threads) {
    const int rr = c / chunks, col = c % chunks;
    const bool ok = rr < rows;
    const T* const src =
        q + (static_cast<int64_t>(q_begin + q0 + rr) * a.num_q_heads + h) * D + col * 8;
    cp_async_16(q_s + rr * row + col * 8, ok ? src : q, ok);
  }

  const C* const cache = static_cast<const C*>(a.cache);
  const C* const head_base = cache + kvh * a.stride_head;
  const int32_t* const bt = a.block_table + static_cast<int64_t>(r) * a.width;
  auto load_kv = [&](int kt, int buf) {
    C* const ks = k_s + buf * bn * load_row;
    C* const vs = v_s + buf * bn * load_row;
#pragma unroll
    for (int i = 0; i < bn * c_chunks / cfg::threads; ++i) {
      const int c = tid + cfg::threads * i;
      const int rr = c / c_chunks, col = c % c_chunks;
      const int key = kt * bn + rr;
      bool ok = key >= lo && key <= hi && key / a.block_size < a.width;
      const int blk = ok ? bt[key / a.block_size] : 0;
      ok = ok && blk >= 0 && blk < a.num_blocks;
      const C* const p = head_base + static_cast<int64_t>(ok ? blk : 0) * a.stride_block
                         + static_cast<int64_t>(key % a.block_size) * a.stride_token
                         + col * per_chunk;
      cp_async_16(ks + rr * load_row + col * per_chunk, ok ? p : cache, ok);
      cp_async_16(vs + rr * load_row + col * per_chunk, ok ? p + a.v_offset : cache, ok);
    }
  };

  const int kt_first = lo / bn;
  const int n_tiles = hi / bn - kt_first + 1;
  load_kv(kt_first, 0);
  cp_async_commit(); // with Q

  // This warp's rows [16 warp, 16 warp + 16) and the keys they see (keys_of_rows).
  const int w_rows = max(0, min(16, rows - 16 * warp));
  const rows_keys wk = keys_of_rows(a, first_pos + 16 * warp, w_rows, seq);
  const int g = lane >> 2, t4 = lane & 3;
  softmax_rows sm = thread_rows(a, first_pos, 16 * warp + g, rows, seq);

  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
    o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

  for (int it = 0; it < n_tiles; ++it) {
    if (it + 1 < n_tiles) load_kv(kt_first + it + 1, (it + 1) & 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const mma_t* ks = reinterpret_cast<const mma_t*>(k_s + (it & 1) * bn * load_row);
    const mma_t* vs = reinterpret_cast<const mma_t*>(v_s + (it & 1) * bn * load_row);
    if constexpr (cfg::fp8) { // the whole CTA converts this tile; the MMAs read the 16-bit copy
      if (it == 0) {          // Q landed with the first tile: to f16, in place
        for (int c = tid; c < bm * D / 2; c += cfg::threads) {
          uint32_t* const x =
              reinterpret_cast<uint32_t*>(q_s + c / (D / 2) * row + 2 * (c % (D / 2)));
          const __half2 h = __float22half2_rn(out_ops::unpack(*x));
          __builtin_memcpy(x, &h, 4);
        }
      }
      const unsigned char* const k8 = reinterpret_cast<const unsigned char*>(ks);
      const unsigned char* const v8 = reinterpret_cast<const unsigned char*>(vs);
#pragma unroll
      for (int i = 0; i < 2 * bn * c_chunks / cfg::threads; ++i) {
        const int c = tid + cfg::threads * i;
        const int kv = c / (bn * c_chunks), rr = c / c_chunks % bn, col = c % c_chunks;
        const uint4 in = *reinterpret_cast<const uint4*>((kv ? v8 : k8) + rr * load_row + col * 16);
        uint4* const dst = reinterpret_cast<uint4*>((kv ? v_conv : k_conv) + rr * row + col * 16);
        fp8x16_to_f16(in, dst[0], dst[1]);
      }
      __syncthreads();
      ks = k_conv;
      vs = v_conv;
    }

    const int k_start = (kt_first + it) * bn;
    const int k_end = k_start + bn - 1;
    if (k_end >= wk.lo && k_start <= wk.hi) {
      const bool need_mask = w_rows < 16 || k_start < wk.lo_max || k_end > wk.hi_min;

      float s[bn / 8][4];
#pragma unroll
      for (int j = 0; j < bn / 8; ++j)
        s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t qa[4];
        ldmatrix_x4(qa, q_s + (16 * warp + (lane & 15)) * row + kk * 16 + (lane >> 4) * 8);
#pragma unroll
        for (int nk = 0; nk < bn / 16; ++nk) {
          uint32_t kb[4];
          ldmatrix_x4(kb, ks + (nk * 16 + (lane & 7) + ((lane >> 4) << 3)) * row + kk * 16
                              + ((lane >> 3) & 1) * 8);
          ops::mma(s[2 * nk], qa, kb[0], kb[1]);
          ops::mma(s[2 * nk + 1], qa, kb[2], kb[3]);
        }
      }

      float alpha[2];
      online_softmax_tile<bn / 8>(
          a, [&](int jj, int e) -> float& { return s[jj][e]; }, k_start, t4, need_mask, sm, alpha);
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt) {
        o[nt][0] *= alpha[0];
        o[nt][1] *= alpha[0];
        o[nt][2] *= alpha[1];
        o[nt][3] *= alpha[1];
      }
#pragma unroll
      for (int nk = 0; nk < bn / 16; ++nk) {
        const uint32_t pa[4] = {ops::pack(s[2 * nk][0], s[2 * nk][1]),
                                ops::pack(s[2 * nk][2], s[2 * nk][3]),
                                ops::pack(s[2 * nk + 1][0], s[2 * nk + 1][1]),
                                ops::pack(s[2 * nk + 1][2], s[2 * nk + 1][3])};
#pragma unroll
        for (int nd = 0; nd < D / 16; ++nd) {
          uint32_t vb[4];
          ldmatrix_x4_trans(vb, vs + (nk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * row + nd * 16
                                    + (lane >> 4) * 8);
          ops::mma(o[2 * nd], pa, vb[0], vb[1]);
          ops::mma(o[2 * nd + 1], pa, vb[2], vb[3]);
        }
      }
    }
    __syncthreads();
  }
  cp_async_wait<0>();

  T* const out = static_cast<T*>(a.out);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int rr = 16 * warp + g + 8 * i;
    const float sum = quad_sum(sm.l[i]);
    if (rr >= rows) continue;
    float acc_scale = 1.0f;
    const float inv = finish_row(a, h, sm.m[i], sum, &acc_scale) * acc_scale;
    T* const dst = out + (static_cast<int64_t>(q_begin + q0 + rr) * a.num_q_heads + h) * D;
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) {
      const uint32_t v = out_ops::pack(o[nt][2 * i] * inv, o[nt][2 * i + 1] * inv);
      *reinterpret_cast<uint32_t*>(dst + nt * 8 + 2 * t4) = v;
    }
  }
}

// Launched after the decode (and merge) kernel with PDL: its rows are disjoint from theirs, so it
// computes at once, and waits for its predecessor only before exiting, so that its completion
// still means the whole attention call's.
template <class T, class C, int D>
__global__ void __launch_bounds__(prefill_config<D, C>::threads)
    prefill_attention_kernel(const attention_args a) {
  pdl_launch_dependents();
  prefill_attention_body<T, C, D>(a);
  pdl_wait_for_predecessor();
}

// For launch_per_head_size.
struct prefill_kernels {
  template <int D, class C>
  using config = prefill_config<D, C>;
  template <class T, class C, int D>
  static auto instance() {
    return prefill_attention_kernel<T, C, D>;
  }
};

} // namespace

cuda_status launch_prefill_attention(const attention_args& a, bool bf16, bool fp8, dim3 grid,
                                     bool pdl, cudaStream_t stream) {
  return launch_per_head_size<prefill_kernels>("prefill attention", a, bf16, fp8, grid, pdl,
                                               stream);
}

} // namespace kvactor::kernels::cuda_detail
