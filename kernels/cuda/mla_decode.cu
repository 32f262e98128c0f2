// MLA kernel: head_size 576 (512 latent + 64 rope), V = the latent's first 512 elements, one KV
// head. One CTA of 4 warps per (query token, chunk of 16 q heads, KV split); every token of the
// batch runs here (decode or not). Per tile of 32 keys, double-buffered through cp.async:
//   1. warp w computes S for keys [8 w, 8 w + 8) over all 576 dims, writes it to shared memory;
//   2. every warp reads all 32 scores of its rows and runs the same online softmax (so max and
//      sum agree across warps), then O[:, 128 w, 128 w + 128) += P V on the tensor cores.
// Each warp owns a quarter of the output dims; no merge across warps is needed.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention_args.h"
#include "device_utils.cuh"
#include "launch_utils.cuh"

namespace kvactor::kernels::cuda_detail {
namespace {

struct mla_config {
  static constexpr int d = 576, dv = 512;
  static constexpr int warps = 4;
  static constexpr int threads = warps * 32;
  static constexpr int bn = 32; // keys per tile
  static constexpr int row = d + 8;
  static constexpr int s_row = bn + 4; // float scores
  // Q [16][row], KV [2][bn][row], S [16][s_row] floats
  static constexpr size_t smem_bytes = 2 * size_t{row} * (16 + 2 * bn) + 4 * 16 * s_row;
};

template <class T>
__global__ void __launch_bounds__(mla_config::threads) mla_decode_kernel(const attention_args a) {
  using cfg = mla_config;
  using ops = mma_ops<T>;
  constexpr int row = cfg::row, bn = cfg::bn, chunks = cfg::d / 8;

  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* const q_s = reinterpret_cast<T*>(smem_raw);
  T* const kv_s = q_s + 16 * row; // [2][bn][row]
  float* const s_s = reinterpret_cast<float*>(kv_s + 2 * bn * row);

  pdl_launch_dependents(); // the merge kernel may be scheduled; it waits for us
  const int t = static_cast<int>(blockIdx.x);
  if (t >= a.query_start_loc[a.num_reqs]) return;
  const int r = request_of_token(a, t);
  const int q_begin = a.query_start_loc[r];
  const int qlen = a.query_start_loc[r + 1] - q_begin;
  const int seq = a.seq_lens[r];
  if (seq < qlen) return;
  const int pos = seq - qlen + (t - q_begin);
  const key_range kr = visible_range(a, pos, seq);
  const int h0 = static_cast<int>(blockIdx.y) * 16;
  const int rows = min(16, a.num_q_heads - h0);
  const int split = static_cast<int>(blockIdx.z);

  const int kt_first = kr.lo / bn;
  const int kt_count = kr.hi / bn - kt_first + 1;
  const int per_split = (kt_count + a.num_splits - 1) / a.num_splits;
  const int my_begin = kt_first + split * per_split;
  const int n_tiles = max(0, min(per_split, kt_first + kt_count - my_begin));

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, lane = tid % 32;
  const T* const q = static_cast<const T*>(a.q);
  for (int c = tid; c < 16 * chunks; c += cfg::threads) {
    const int rr = c / chunks, col = c % chunks;
    const bool ok = rr < rows;
    const T* const src = q + (static_cast<int64_t>(t) * a.num_q_heads + h0 + rr) * cfg::d + col * 8;
    cp_async_16(q_s + rr * row + col * 8, ok ? src : q, ok);
  }

  const T* const cache = static_cast<const T*>(a.cache);
  const int32_t* const bt = a.block_table + static_cast<int64_t>(r) * a.width;
  auto load_kv = [&](int kt, int buf) {
    T* const ks = kv_s + buf * bn * row;
    for (int c = tid; c < bn * chunks; c += cfg::threads) {
      const int rr = c / chunks, col = c % chunks;
      const int key = kt * bn + rr;
      bool ok = key >= kr.lo && key <= kr.hi && key / a.block_size < a.width;
      const int blk = ok ? bt[key / a.block_size] : 0;
      ok = ok && blk >= 0 && blk < a.num_blocks;
      const T* const p = cache + static_cast<int64_t>(ok ? blk : 0) * a.stride_block
                         + static_cast<int64_t>(key % a.block_size) * a.stride_token + col * 8;
      cp_async_16(ks + rr * row + col * 8, ok ? p : cache, ok);
    }
  };
  if (n_tiles > 0) load_kv(my_begin, 0);
  cp_async_commit(); // with Q

  const int g = lane >> 2, t4 = lane & 3;
  float o[16][4]; // dims [128 warp, 128 warp + 128) as 16 n8 tiles
#pragma unroll
  for (int n = 0; n < 16; ++n)
    o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};

  for (int it = 0; it < n_tiles; ++it) {
    if (it + 1 < n_tiles) load_kv(my_begin + it + 1, (it + 1) & 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const T* const ks = kv_s + (it & 1) * bn * row;
    const int k_start = (my_begin + it) * bn;

    // 1. S for this warp's 8 keys; two accumulators shorten the dependency chain.
    float s0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, s1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 6
    for (int kk = 0; kk < cfg::d / 16; kk += 2) {
      uint32_t qa[4], kb[4];
      ldmatrix_x4(qa, q_s + (lane & 15) * row + kk * 16 + (lane >> 4) * 8);
      // matrices: keys 8w..8w+7 x dims kk*16 + {0, 8}, then (kk + 1)*16 + {0, 8}
      ldmatrix_x4(kb, ks + (8 * warp + (lane & 7)) * row + kk * 16 + (lane >> 3) * 8);
      ops::mma(s0, qa, kb[0], kb[1]);
      ldmatrix_x4(qa, q_s + (lane & 15) * row + (kk + 1) * 16 + (lane >> 4) * 8);
      ops::mma(s1, qa, kb[2], kb[3]);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = k_start + 8 * warp + 2 * t4 + (e & 1);
      const float v = score_log2(a, s0[e] + s1[e]);
      s_s[(g + 8 * (e >> 1)) * cfg::s_row + 8 * warp + 2 * t4 + (e & 1)] =
          key >= kr.lo && key <= kr.hi ? v : -INFINITY;
    }
    __syncthreads();

    // 2. Softmax over the tile's 32 keys (identical in every warp), then P V for this warp's dims.
    float p[2][2][4]; // [k-step][row half][keys 2t, 2t+1, 2t+8, 2t+9]
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int ksx = 0; ksx < 2; ++ksx) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const float* const sr = s_s + (g + 8 * i) * cfg::s_row + ksx * 16 + 2 * t4;
        p[ksx][i][0] = sr[0];
        p[ksx][i][1] = sr[1];
        p[ksx][i][2] = sr[8];
        p[ksx][i][3] = sr[9];
#pragma unroll
        for (int e = 0; e < 4; ++e)
          tile_max[i] = fmaxf(tile_max[i], p[ksx][i][e]);
      }
    }
    float base[2], alpha[2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
      base[i] = online_rescale(m[i], quad_max(tile_max[i]), &alpha[i]);
    float sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int ksx = 0; ksx < 2; ++ksx) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          p[ksx][i][e] = fast_exp2(p[ksx][i][e] - base[i]);
          sum[i] += p[ksx][i][e];
        }
      }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
      l[i] = l[i] * alpha[i] + sum[i];
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) {
      o[nt][0] *= alpha[0];
      o[nt][1] *= alpha[0];
      o[nt][2] *= alpha[1];
      o[nt][3] *= alpha[1];
    }
#pragma unroll
    for (int ksx = 0; ksx < 2; ++ksx) {
      const uint32_t pa[4] = {
          ops::pack(p[ksx][0][0], p[ksx][0][1]), ops::pack(p[ksx][1][0], p[ksx][1][1]),
          ops::pack(p[ksx][0][2], p[ksx][0][3]), ops::pack(p[ksx][1][2], p[ksx][1][3])};
#pragma unroll
      for (int nd = 0; nd < 8; ++nd) {
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, ks + (ksx * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * row
                                  + 128 * warp + nd * 16 + (lane >> 4) * 8);
        ops::mma(o[2 * nd], pa, vb[0], vb[1]);
        ops::mma(o[2 * nd + 1], pa, vb[2], vb[3]);
      }
    }
    __syncthreads();
  }
  cp_async_wait<0>();

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int rr = g + 8 * i;
    const float sum = quad_sum(l[i]);
    if (rr >= rows) continue;
    const int h = h0 + rr;
    const int64_t out_row = static_cast<int64_t>(t) * a.num_q_heads + h;
    if (a.num_splits == 1) {
      float acc_scale = 1.0f;
      const float inv = finish_row(a, h, m[i], sum, &acc_scale) * acc_scale;
      T* const dst = static_cast<T*>(a.out) + out_row * cfg::dv + 128 * warp;
#pragma unroll
      for (int nt = 0; nt < 16; ++nt)
        *reinterpret_cast<uint32_t*>(dst + nt * 8 + 2 * t4) =
            ops::pack(o[nt][2 * i] * inv, o[nt][2 * i + 1] * inv);
    } else {
      const int64_t idx = out_row * a.num_splits + split;
      float* const dst = a.partial_out + idx * cfg::dv + 128 * warp;
#pragma unroll
      for (int nt = 0; nt < 16; ++nt)
        *reinterpret_cast<float2*>(dst + nt * 8 + 2 * t4) =
            make_float2(o[nt][2 * i], o[nt][2 * i + 1]);
      if (warp == 0 && t4 == 0) {
        a.partial_ml[2 * idx] = m[i];
        a.partial_ml[2 * idx + 1] = sum;
      }
    }
  }
}

} // namespace

int32_t mla_ctas_per_sm() {
  return 2;
}

cuda_status launch_mla_decode(const attention_args& a, bool bf16, dim3 grid, cudaStream_t stream) {
  return dispatch_half_type(bf16, [&](auto type) {
    using T = typename decltype(type)::type;
    return launch_kernel_with_smem(mla_decode_kernel<T>, grid, mla_config::threads,
                                   mla_config::smem_bytes, false, stream, a);
  });
}

} // namespace kvactor::kernels::cuda_detail
