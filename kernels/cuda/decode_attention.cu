// Decode kernel: one CTA of 4 warps per (request, KV head, row chunk, KV split). The CTA's rows
// are up to 16 (query token, q head) pairs of one GQA group, so each K/V entry is read once for
// all q heads of the group. The warps take the CTA's 16-key sub-tiles round-robin, each with its
// own cp.async pipeline (STAGES sub-tiles in flight, 16-byte copies into padded shared rows),
// and runs S = Q K^T and O += P V on the tensor cores (mma.sync m16n8k16) with an online softmax.
// At the end the 4 warps' (max, sum, O) are merged in shared memory; the CTA writes the final
// rows, or, with several splits, its partial result, and the last split CTA of a row group to
// finish (a counter in the workspace) merges the group's partials and writes the rows: no merge
// launch. Each CTA lets the next
// kernel (merge or prefill, launched with PDL) be scheduled as soon as it starts.
// An FP8 cache lands in byte-wide staging rows and the MMAs run in f16 (every E4M3 value is an
// f16 value; P in [0, 1] too; q is converted once): K goes from staging straight into B
// fragments (ldmatrix of byte pairs, then a conversion per pair; the dims of a 16-dim block are
// permuted, the same way in Q's fragments, which a dot product does not see); V is converted into
// a 16-bit tile for ldmatrix.trans. The scales apply to the scores (k_scale) and the output
// (v_scale).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "attention_args.h"
#include "device_utils.cuh"
#include "launch_utils.cuh"
#include "split_merge.cuh"

namespace kvactor::kernels::cuda_detail {
namespace {

// C: the cache's element type (T, or __nv_fp8_e4m3).
template <int D, class C>
struct decode_config {
  static constexpr bool fp8 = sizeof(C) == 1;
  static constexpr int warps = 4;
  static constexpr int threads = warps * 32;
  static constexpr int stages = fp8 ? 4 : 3; // sub-tiles in flight per warp
  static constexpr int row = D + 8; // 16-bit shared row stride in elements: +16 bytes (conflicts)
  static constexpr int tile = 16 * row;                     // one 16-row tile of 16-bit elements
  static constexpr int stage_row = D * int{sizeof(C)} + 16; // staging row stride in bytes
  static constexpr int stage_tile = 16 * stage_row;         // bytes
  static constexpr int chunks = D * int{sizeof(C)} / 16;    // 16-byte chunks per cache row
  // Q, then per warp and stage: K, V; with FP8, per warp: K, V converted to 16 bits.
  static constexpr size_t stage_bytes = size_t{warps} * stages * 2 * stage_tile;
  // FP8: Q in f16 for the permuted fragments, rows of D + 16 (conflict-free 8-byte loads).
  static constexpr int qh_row = D + 16;
  static constexpr size_t fp8_bytes = 2 * size_t{16} * qh_row + size_t{warps} * 2 * tile;
  static constexpr size_t smem_bytes = 2 * size_t{tile} + stage_bytes + (fp8 ? fp8_bytes : 0);
  // The warps' merge reuses the stages: O [warps][16][D + 4], max [warps][16], sum [warps][16].
  static constexpr int red_row = D + 4;
  static_assert(4 * (warps * 16 * red_row + 2 * warps * 16) <= stage_bytes);
};

// This warp's V sub-tile of 16 FP8 rows in staging -> f16 rows of `row` elements.
template <int D, class C>
__device__ __forceinline__ void convert_v_subtile(const unsigned char* vs8, __half* vs, int lane) {
  using cfg = decode_config<D, C>;
#pragma unroll
  for (int i = 0; i < 16 * cfg::chunks / 32; ++i) {
    const int c = lane + 32 * i;
    const int rr = c / cfg::chunks, col = c % cfg::chunks;
    const uint4 in = *reinterpret_cast<const uint4*>(vs8 + rr * cfg::stage_row + col * 16);
    uint4* const dst = reinterpret_cast<uint4*>(vs + rr * cfg::row + col * 16);
    fp8x16_to_f16(in, dst[0], dst[1]);
  }
}

// S += Q K^T over one 16-key FP8 sub-tile in staging (rows of stage_row bytes). ldmatrix hands
// lane (g, t4) bytes 4 t4 .. 4 t4 + 3 of key g in a 16-dim block: converted, dims 4t4, 4t4+1 are
// its b0 and 4t4+2, 4t4+3 its b1, so the MMA's k index 2t4 (+1) is dim 4t4 (+1) and 2t4 + 8 (+1)
// is dim 4t4 + 2 (+3); Q's a0..a3 are read with the same map (one 8-byte load per row).
template <int D, class C>
__device__ __forceinline__ void qk_fp8(float (&s)[2][4], const __half* qh, const unsigned char* ks8,
                                       int lane) {
  using cfg = decode_config<D, C>;
  using ops = mma_ops<__half>;
  const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int kk = 0; kk < D / 16; kk += 2) {
    // matrices: (keys 0-7, block kk), (keys 8-15, kk), (0-7, kk + 1), (8-15, kk + 1)
    uint32_t kr[4];
    ldmatrix_x4(kr, ks8 + (((lane >> 3) & 1) * 8 + (lane & 7)) * cfg::stage_row
                        + (kk + (lane >> 4)) * 16);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const __half* const q0 = qh + g * cfg::qh_row + (kk + h) * 16 + 4 * t4;
      const uint2 lo = *reinterpret_cast<const uint2*>(q0);
      const uint2 hi = *reinterpret_cast<const uint2*>(q0 + 8 * cfg::qh_row);
      const uint32_t qa[4] = {lo.x, hi.x, lo.y, hi.y};
      ops::mma(s[0], qa, fp8x2_to_f16x2(kr[2 * h]), fp8x2_to_f16x2(kr[2 * h] >> 16));
      ops::mma(s[1], qa, fp8x2_to_f16x2(kr[2 * h + 1]), fp8x2_to_f16x2(kr[2 * h + 1] >> 16));
    }
  }
}

// Split CTAs: counts this CTA's arrival in its row group (every split of the group arrives, with
// or without keys) and, in the last one, merges the group's `rows` rows. The partials are
// fenced before the count and read from L2 after it.
template <class T>
__device__ __forceinline__ void merge_if_last(const attention_args& a, int r, int rows, int row0,
                                              int q_begin, int kvh) {
  __shared__ int last;
  __threadfence();
  __syncthreads();
  const int64_t group_row = static_cast<int64_t>(r) * gridDim.y + blockIdx.y;
  if (threadIdx.x == 0) {
    last = atomicAdd(a.split_counters + group_row, 1) == a.num_splits - 1;
    if (last) a.split_counters[group_row] = 0; // every split has arrived: ready for the next call
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const int per_row = a.v_size / 4;
  for (int c = static_cast<int>(threadIdx.x); c < rows * per_row; c += blockDim.x) {
    const int rr = c / per_row, col = 4 * (c % per_row);
    const int gr = row0 + rr;
    const int h = kvh * a.group + gr % a.group;
    store4<T>(a, (static_cast<int64_t>(q_begin) + gr / a.group) * a.num_q_heads + h, col,
              merge_row(a, group_row * decode_rows + rr, h, col));
  }
}

template <class T, class C, int D>
__global__ void __launch_bounds__(decode_config<D, C>::threads)
    decode_attention_kernel(const attention_args a) {
  using cfg = decode_config<D, C>;
  using mma_t = std::conditional_t<cfg::fp8, __half, T>; // FP8: f16 MMAs
  using ops = mma_ops<mma_t>;
  using out_ops = mma_ops<T>;
  constexpr int row = cfg::row;
  constexpr int chunks = D / 8;                  // 16-byte chunks per 16-bit row
  constexpr int c_chunks = cfg::chunks;          // 16-byte chunks per cache row
  constexpr int per_chunk = 16 / int{sizeof(C)}; // cache elements per chunk
  static_assert(cfg::fp8 || cfg::stage_row == 2 * row, "16-bit stages are the MMAs' tiles");

  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* const q_s = reinterpret_cast<T*>(smem_raw);
  unsigned char* const stage_s = smem_raw + 2 * cfg::tile;

  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int r = static_cast<int>(blockIdx.x);
  const int chunk = static_cast<int>(blockIdx.y) % a.row_chunks;
  const int kvh = static_cast<int>(blockIdx.y) / a.row_chunks;
  const int split = static_cast<int>(blockIdx.z);
  // Launched as a programmatic dependent of the KV write: wait for it, and only then let the
  // merge (or prefill) kernel be scheduled (the prefill kernel reads the cache before it waits).
  pdl_wait_for_predecessor();
  pdl_launch_dependents();

  // Block ids: lane i holds those of this warp's sub-tiles n = base + i (ids) and base + 32 + i
  // (ids_next); sub-tile n of this warp is my_begin + warp + 4 n.
  const int32_t* const bt = a.block_table + static_cast<int64_t>(r) * a.width;
  auto block_id = [&](int my_begin, int n) {
    const int idx = (my_begin + warp + 4 * n) * 16 / a.block_size;
    return idx < a.width ? bt[idx] : -1;
  };
  int ids = -1, ids_next = -1;
  if (a.split_subtiles > 0) { // known before the request's length: load with it
    ids = block_id(split * a.split_subtiles, lane);
    ids_next = block_id(split * a.split_subtiles, 32 + lane);
  }

  const int q_begin = a.query_start_loc[r];
  const int qlen = a.query_start_loc[r + 1] - q_begin;
  const int seq = a.seq_lens[r];
  if (qlen <= 0 || seq < qlen || !is_decode_request(qlen, a.group)) return;
  const int rows_total = qlen * a.group;
  const int row0 = chunk * decode_rows;
  if (row0 >= rows_total) return;
  const int rows = min(decode_rows, rows_total - row0);

  // Keys any row of the CTA sees (positions grow with the row), cut into 16-key sub-tiles, and
  // this split's share of them.
  const int lo = visible_range(a, seq - qlen + row0 / a.group, seq).lo;
  const int hi = visible_range(a, seq - qlen + (row0 + rows - 1) / a.group, seq).hi;
  const int sub_first = lo / 16;
  const int sub_count = hi / 16 - sub_first + 1;
  int my_begin = 0, my_end = 0;
  if (a.split_subtiles > 0) {
    my_begin = split * a.split_subtiles; // lo is 0 here
    my_end = min(my_begin + a.split_subtiles, sub_first + sub_count);
  } else {
    const int per_split = (sub_count + a.num_splits - 1) / a.num_splits;
    my_begin = sub_first + split * per_split;
    my_end = min(my_begin + per_split, sub_first + sub_count);
    ids = block_id(my_begin, lane);
    ids_next = block_id(my_begin, 32 + lane);
  }

  // Q rows -> shared (zeros for rows past the request's), in the first cp.async group.
  const T* const q = static_cast<const T*>(a.q);
  for (int c = static_cast<int>(threadIdx.x); c < 16 * chunks; c += cfg::threads) {
    const int rr = c / chunks, col = c % chunks;
    const int gr = row0 + rr;
    const int64_t t = q_begin + gr / a.group;
    const int h = kvh * a.group + gr % a.group;
    const bool ok = rr < rows;
    cp_async_16(q_s + rr * row + col * 8, ok ? q + (t * a.num_q_heads + h) * D + col * 8 : q, ok);
  }

  // This thread's accumulator rows are g and g + 8 (mma C layout).
  const int g = lane >> 2, t4 = lane & 3;
  int row_lo[2], row_hi[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int rr = g + 8 * i;
    row_lo[i] = 1;
    row_hi[i] = 0; // a row past the request's sees nothing
    if (rr < rows) {
      const key_range kr = visible_range(a, seq - qlen + (row0 + rr) / a.group, seq);
      row_lo[i] = kr.lo;
      row_hi[i] = kr.hi;
    }
  }

  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
    o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};

  // Sub-tile n of this warp is my_begin + warp + 4 n.
  const int n_tiles = my_end - my_begin - warp > 0 ? (my_end - my_begin - warp + 3) / 4 : 0;
  unsigned char* const my_stages = stage_s + warp * cfg::stages * 2 * cfg::stage_tile;
  __half* const qh_s = reinterpret_cast<__half*>(stage_s + cfg::stage_bytes); // FP8 only
  __half* const my_v16 = qh_s + 16 * cfg::qh_row + warp * cfg::tile;          // FP8 only
  const C* const cache = static_cast<const C*>(a.cache);
  const C* const head_base = cache + kvh * a.stride_head;

  auto issue = [&](int n) {
    if (n < n_tiles) {
      if ((n & 31) == 0 && n > 0) { // next batch of block ids; the one after starts loading
        ids = ids_next;
        ids_next = block_id(my_begin, n + 32 + lane);
      }
      const int blk = __shfl_sync(0xffffffffu, ids, n & 31);
      const int key0 = (my_begin + warp + 4 * n) * 16;
      const bool blk_ok = blk >= 0 && blk < a.num_blocks;
      const C* const src = head_base + static_cast<int64_t>(blk_ok ? blk : 0) * a.stride_block
                           + static_cast<int64_t>(key0 % a.block_size) * a.stride_token;
      unsigned char* const ks = my_stages + (n % cfg::stages) * 2 * cfg::stage_tile;
      unsigned char* const vs = ks + cfg::stage_tile;
#pragma unroll
      for (int i = 0; i < 16 * c_chunks / 32; ++i) {
        const int c = lane + 32 * i;
        const int rr = c / c_chunks, col = c % c_chunks;
        const int key = key0 + rr;
        const bool ok = blk_ok && key >= lo && key <= hi;
        const C* const p = src + rr * a.stride_token + col * per_chunk;
        cp_async_16(ks + rr * cfg::stage_row + col * 16, ok ? p : cache, ok);
        cp_async_16(vs + rr * cfg::stage_row + col * 16, ok ? p + a.v_offset : cache, ok);
      }
    }
    cp_async_commit(); // empty groups keep the wait counts uniform
  };

#pragma unroll
  for (int s = 0; s < cfg::stages - 1; ++s)
    issue(s);
  // Q (and sub-tile 0) landed; every warp reads all of Q.
  cp_async_wait<cfg::stages - 2>();
  __syncthreads();
  if constexpr (cfg::fp8) { // Q in f16 for the f16 MMAs
    for (int c = static_cast<int>(threadIdx.x); c < 16 * D / 2; c += cfg::threads) {
      const int rr = c / (D / 2), col = 2 * (c % (D / 2));
      const float2 x = out_ops::unpack(*reinterpret_cast<const uint32_t*>(q_s + rr * row + col));
      *reinterpret_cast<__half2*>(qh_s + rr * cfg::qh_row + col) = __float22half2_rn(x);
    }
    __syncthreads();
  }

  for (int n = 0; n < n_tiles; ++n) {
    issue(n + cfg::stages - 1);
    cp_async_wait<cfg::stages - 1>();
    __syncwarp();
    const unsigned char* const stage = my_stages + (n % cfg::stages) * 2 * cfg::stage_tile;
    const mma_t* vs = reinterpret_cast<const mma_t*>(stage + cfg::stage_tile);
    const int key0 = (my_begin + warp + 4 * n) * 16;

    // S = Q K^T: 16 rows x 16 keys, as two n8 tiles.
    float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    if constexpr (cfg::fp8) {
      qk_fp8<D, C>(s, qh_s, stage, lane);
      convert_v_subtile<D, C>(stage + cfg::stage_tile, my_v16, lane);
      __syncwarp();
      vs = my_v16;
    } else {
      const T* const ks = reinterpret_cast<const T*>(stage);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t qa[4], kb[4];
        ldmatrix_x4(qa, q_s + (lane & 15) * row + kk * 16 + (lane >> 4) * 8);
        ldmatrix_x4(kb,
                    ks + ((lane & 7) + ((lane >> 4) << 3)) * row + kk * 16 + ((lane >> 3) & 1) * 8);
        ops::mma(s[0], qa, kb[0], kb[1]);
        ops::mma(s[1], qa, kb[2], kb[3]);
      }
    }

    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = e >> 1;
        const int key = key0 + j * 8 + 2 * t4 + (e & 1);
        const float x = score_log2(a, s[j][e]);
        s[j][e] = key >= row_lo[i] && key <= row_hi[i] ? x : -INFINITY;
        tile_max[i] = fmaxf(tile_max[i], s[j][e]);
      }
    }
    float base[2], alpha[2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
      base[i] = online_rescale(m[i], quad_max(tile_max[i]), &alpha[i]);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s[j][e] = fast_exp2(s[j][e] - base[e >> 1]);
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
      l[i] = l[i] * alpha[i] + s[0][2 * i] + s[0][2 * i + 1] + s[1][2 * i] + s[1][2 * i + 1];
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) {
      o[nt][0] *= alpha[0];
      o[nt][1] *= alpha[0];
      o[nt][2] *= alpha[1];
      o[nt][3] *= alpha[1];
    }

    // O += P V: P from the S accumulators (C layout -> A layout), V^T through ldmatrix.trans.
    const uint32_t pa[4] = {ops::pack(s[0][0], s[0][1]), ops::pack(s[0][2], s[0][3]),
                            ops::pack(s[1][0], s[1][1]), ops::pack(s[1][2], s[1][3])};
#pragma unroll
    for (int nd = 0; nd < D / 16; ++nd) {
      uint32_t vb[4];
      ldmatrix_x4_trans(vb, vs + ((lane & 7) + ((lane >> 3) & 1) * 8) * row + nd * 16
                                + (lane >> 4) * 8);
      ops::mma(o[2 * nd], pa, vb[0], vb[1]);
      ops::mma(o[2 * nd + 1], pa, vb[2], vb[3]);
    }
    __syncwarp();
  }
  cp_async_wait<0>();
#pragma unroll
  for (int i = 0; i < 2; ++i)
    l[i] = quad_sum(l[i]);

  // Merge the warps' partial results in shared memory (the stages are free now).
  __syncthreads();
  float* const red_o = reinterpret_cast<float*>(stage_s);
  float* const red_m = red_o + cfg::warps * 16 * cfg::red_row;
  float* const red_l = red_m + cfg::warps * 16;
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt) {
    float* const p = red_o + (warp * 16 + g) * cfg::red_row + nt * 8 + 2 * t4;
    *reinterpret_cast<float2*>(p) = make_float2(o[nt][0], o[nt][1]);
    *reinterpret_cast<float2*>(p + 8 * cfg::red_row) = make_float2(o[nt][2], o[nt][3]);
  }
  if (t4 == 0) {
    red_m[warp * 16 + g] = m[0];
    red_m[warp * 16 + g + 8] = m[1];
    red_l[warp * 16 + g] = l[0];
    red_l[warp * 16 + g + 8] = l[1];
  }
  __syncthreads();

  for (int c = static_cast<int>(threadIdx.x); c < 16 * chunks; c += cfg::threads) {
    const int rr = c / chunks, col = (c % chunks) * 8;
    if (rr >= rows) continue;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < cfg::warps; ++w)
      mx = fmaxf(mx, red_m[w * 16 + rr]);
    const float base = mx == -INFINITY ? 0.0f : mx;
    float sum = 0.0f;
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int w = 0; w < cfg::warps; ++w) {
      const float wgt = fast_exp2(red_m[w * 16 + rr] - base);
      sum += wgt * red_l[w * 16 + rr];
      const float* const p = red_o + (w * 16 + rr) * cfg::red_row + col;
      const float4 x0 = *reinterpret_cast<const float4*>(p);
      const float4 x1 = *reinterpret_cast<const float4*>(p + 4);
      acc[0] += wgt * x0.x;
      acc[1] += wgt * x0.y;
      acc[2] += wgt * x0.z;
      acc[3] += wgt * x0.w;
      acc[4] += wgt * x1.x;
      acc[5] += wgt * x1.y;
      acc[6] += wgt * x1.z;
      acc[7] += wgt * x1.w;
    }
    const int gr = row0 + rr;
    const int64_t t = q_begin + gr / a.group;
    const int h = kvh * a.group + gr % a.group;
    const int64_t out_row = t * a.num_q_heads + h;
    if (a.num_splits == 1) {
      float acc_scale = 1.0f;
      const float inv = finish_row(a, h, mx, sum, &acc_scale) * acc_scale;
      uint4 packed;
      packed.x = out_ops::pack(acc[0] * inv, acc[1] * inv);
      packed.y = out_ops::pack(acc[2] * inv, acc[3] * inv);
      packed.z = out_ops::pack(acc[4] * inv, acc[5] * inv);
      packed.w = out_ops::pack(acc[6] * inv, acc[7] * inv);
      *reinterpret_cast<uint4*>(static_cast<T*>(a.out) + out_row * D + col) = packed;
    } else {
      const int64_t prow = (static_cast<int64_t>(r) * gridDim.y + blockIdx.y) * decode_rows + rr;
      const int64_t idx = prow * a.num_splits + split;
      float* const po = a.partial_out + idx * D + col;
      *reinterpret_cast<float4*>(po) = make_float4(acc[0], acc[1], acc[2], acc[3]);
      *reinterpret_cast<float4*>(po + 4) = make_float4(acc[4], acc[5], acc[6], acc[7]);
      if (col == 0) {
        a.partial_ml[2 * idx] = mx;
        a.partial_ml[2 * idx + 1] = sum;
      }
    }
  }
  if (a.num_splits > 1) merge_if_last<T>(a, r, rows, row0, q_begin, kvh);
}

// For launch_per_head_size.
struct decode_kernels {
  template <int D, class C>
  using config = decode_config<D, C>;
  template <class T, class C, int D>
  static auto instance() {
    return decode_attention_kernel<T, C, D>;
  }
};

} // namespace

cuda_status launch_decode_attention(const attention_args& a, bool bf16, bool fp8, dim3 grid,
                                    bool pdl, cudaStream_t stream) {
  return launch_per_head_size<decode_kernels>("decode attention", a, bf16, fp8, grid, pdl, stream);
}

} // namespace kvactor::kernels::cuda_detail
