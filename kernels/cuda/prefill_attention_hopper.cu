// Prefill kernel for Hopper (sm_90a): warpgroup MMAs (wgmma) fed by the copy engine (TMA). A
// work item is a (128-query tile of a request, q head); a CTA of two consumer warpgroups (64 query
// rows each) and a producer warpgroup runs items. The tile slots enumerate the tiles of all
// requests as the mma.sync kernel does (request r's tiles are slots query_start_loc[r] / 128 + r +
// i), walked from the last slot down so that a request's longest causal tiles come first.
//
// Two schedules. Persistent (a workspace holds its counters): as many CTAs as fit on the GPU at
// once, each taking item after item from a counter (the head varies fastest); the producer
// streams the next item's K/V while the consumers finish the current one, and each consumer
// warpgroup loads its next Q rows under its last P V, so an item costs no CTA start, no pipeline
// fill and no exposed Q load. Within a request the tiles run from the longest causal one down and
// the batch's last items are its first request's shortest tiles, so the CTAs finish close
// together. One CTA per item (no workspace): the grid is (slots, heads).
//
// The producer's four warps walk the request's block table, one lane per 16-key group (a quarter
// of a tile's groups per warp), and issue per group and 64-column block one TMA copy of K and one
// of V into a stage of a 2-3 deep ring (the copies swizzle into wgmma.cuh's layout); a stage's
// "full" barrier completes once each producer warp has announced its bytes and they have arrived,
// its "empty" barrier when every consumer warp has finished with it. The producer keeps 40
// registers (setmaxnreg) so that the consumers get 232. Per tile a consumer warpgroup computes S =
// Q K^T with Q and K from shared memory, the online softmax in registers, and O += P V with P from
// registers (the score accumulators, rounded to 16 bits, are exactly the A fragments) and V read
// transposed. The online softmax is lazy: a row's running max moves only when a tile's max passes
// it by more than 8 (log2 units, a factor of 2^8), so most tiles keep O's scale and skip its
// rescale. A warpgroup skips the tiles none of its rows sees and masks only those its rows see in
// part; V rows of keys no row sees are zeroed (slots past a sequence may hold NaN). Same features
// as the mma.sync kernel: GQA, causal or not, sliding window, chunked local, soft-cap, sinks;
// 16-bit caches of head size 64, 128 or 256 in either entry layout.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <tuple>
#include <unordered_map>

#include "attention_args.h"
#include "device_utils.cuh"
#include "launch_utils.cuh"
#include "tma.cuh"
#include "wgmma.cuh"

// Diagnostic builds (bench/prefill_bounds.sh, CMake's KVACTOR_PREFILL_BOUND): 1 runs the K/V
// stream alone, 2 everything but the softmax. Their outputs are wrong on purpose.
#ifndef KVACTOR_PREFILL_BOUND
#define KVACTOR_PREFILL_BOUND 0
#endif

namespace kvactor::kernels::cuda_detail {
namespace {

template <int D>
struct hopper_prefill_config {
  static constexpr int consumers = 256;           // two warpgroups of 64 query rows
  static constexpr int threads = consumers + 128; // and the producer warpgroup
  // The producer's 40 registers hold the scheduler's item without spilling (24 did not).
  static constexpr int producer_registers = 40;
  static constexpr int consumer_registers = 232; // 2 x 128 x 232 + 128 x 40 <= 64 K registers
  // One CTA per multiprocessor (hopper_prefill_ctas_per_sm): at launch its threads hold the 168
  // registers each that setmaxnreg redistributes, 64 K in all.
  static constexpr int bm = hopper_prefill_tile;
  static_assert(bm == 128);
  static constexpr int bn = D == 256 ? 64 : 128;  // keys per tile
  static constexpr int stages = D == 256 ? 2 : 3; // K/V tiles in flight
  static constexpr int n_o = D < 128 ? D : 128;   // output columns of one P V MMA
  static constexpr int o_parts = D / n_o;
  static constexpr size_t q_bytes = size_t{bm} * D * 2;
  static constexpr size_t tile_bytes = size_t{bn} * D * 2;
  static constexpr size_t group_bytes = size_t{16} * D * 2; // 16 keys of K or of V
  static constexpr int producer_warps = 4;
  static constexpr int groups_per_producer_warp = bn / 16 / producer_warps;
  static_assert(groups_per_producer_warp * producer_warps * 16 == bn);
  // 1024 bytes of slack to align the swizzled tiles; Q; K then V of every stage; the stages'
  // barriers; the two item slots' barriers and the slots (32 bytes each).
  static constexpr size_t smem_bytes =
      1024 + q_bytes + 2 * stages * tile_bytes + 2 * stages * 8 + 4 * 8 + 2 * 32;
};

/// One work item: the 128-query tile of request r from its query row q0 (rows of them, of qlen,
/// the request's rows starting at q_begin in the batch; seq keys) and q head h. r < 0: no more.
struct prefill_item {
  int r, q_begin, qlen, seq, q0, rows, h, unused;
};
static_assert(sizeof(prefill_item) == 32);

/// The request of tile slot x (see the file comment) and the slot's tile, or false when the slot
/// has no rows (then r, q_begin, qlen, seq and q0 still describe the slot).
__device__ __forceinline__ bool find_prefill_tile(const attention_args& a, int x, int bm,
                                                  prefill_item* t) {
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

// The highest slot below x that may hold a tile, after find_prefill_tile found none at x: the
// request's last tile when x lies past it, else the slot before the request's first (-1: none).
__device__ __forceinline__ int lower_slot_with_work(const attention_args& a, const prefill_item& t,
                                                    int bm) {
  const int first = t.q_begin / bm + t.r;
  const bool prefill = t.qlen > 0 && t.seq >= t.qlen && !is_decode_request(t.qlen, a.group);
  return prefill && t.q0 >= t.qlen ? first + (t.qlen + bm - 1) / bm - 1 : first - 1;
}

// The CTA's item n. One CTA per item (no schedule): blockIdx's slot and head, as item 0.
// Persistent: the next index of the schedule's counter. Items run by slot from the last (a
// request's longest causal tiles first) and by head within a slot, so the last items handed out
// are short ones. An empty slot moves the counter past the slots it proves empty (atomicMax:
// every index below the new value is empty or already taken, so nothing is lost or repeated).
// When the items run out, the last CTA to notice leaves both counters at zero for the next call.
// NOTE(pdl): this kernel starts before its predecessor completes and takes items at once. Two
// calls on one workspace stay apart because the decode kernel runs between them and lets its
// dependent start only after its own predecessor (this kernel of the previous call) completed.
__device__ prefill_item next_prefill_item(const attention_args& a, int n, int bm) {
  prefill_item t{};
  t.r = -1;
  if (a.prefill_schedule == nullptr) {
    if (n == 0 && find_prefill_tile(a, static_cast<int>(gridDim.x - 1 - blockIdx.x), bm, &t)) {
      t.h = static_cast<int>(blockIdx.y);
      return t;
    }
    t.r = -1;
    return t;
  }
  const int heads = a.num_q_heads, total = a.prefill_slots * heads;
  for (;;) {
    const int idx = atomicAdd(a.prefill_schedule, 1);
    if (idx >= total) break;
    if (find_prefill_tile(a, a.prefill_slots - 1 - idx / heads, bm, &t)) {
      t.h = idx % heads;
      return t;
    }
    const int lower = lower_slot_with_work(a, t, bm);
    atomicMax(a.prefill_schedule, lower < 0 ? total : (a.prefill_slots - 1 - lower) * heads);
  }
  __threadfence(); // this CTA's last use of the counter, before it counts itself out
  if (atomicAdd(a.prefill_schedule + 1, 1) == static_cast<int>(gridDim.x) - 1) {
    __threadfence();
    a.prefill_schedule[0] = 0;
    a.prefill_schedule[1] = 0;
  }
  t.r = -1;
  return t;
}

// What every thread of the CTA knows about its tile: the keys any row sees, [lo, hi], and the
// key tiles that cover them.
struct prefill_cta_keys {
  int lo, hi, kt_first, n_tiles;
};

template <int D>
__device__ __forceinline__ prefill_cta_keys keys_of_item(const attention_args& a,
                                                         const prefill_item& t) {
  constexpr int bn = hopper_prefill_config<D>::bn;
  const int first_pos = t.seq - t.qlen + t.q0;
  prefill_cta_keys k;
  k.lo = visible_range(a, first_pos, t.seq).lo;
  k.hi = visible_range(a, first_pos + t.rows - 1, t.seq).hi;
  k.kt_first = k.lo / bn;
  k.n_tiles = max(0, k.hi / bn - k.kt_first + 1);
  return k;
}

// The CTA's shared memory: Q, the K/V ring, its barriers, and the ring of two item slots.
template <int D>
struct hopper_prefill_smem {
  unsigned char *q, *k, *v;
  uint64_t *full, *empty, *item_full, *item_empty;
  prefill_item* items;
};

template <int D>
__device__ __forceinline__ hopper_prefill_smem<D> carve_smem(unsigned char* raw) {
  using cfg = hopper_prefill_config<D>;
  const auto raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(raw));
  hopper_prefill_smem<D> s;
  s.q = raw + ((1024 - raw_addr % 1024) % 1024);
  s.k = s.q + cfg::q_bytes; // [stages] tiles
  s.v = s.k + cfg::stages * cfg::tile_bytes;
  s.full = reinterpret_cast<uint64_t*>(s.v + cfg::stages * cfg::tile_bytes);
  s.empty = s.full + cfg::stages;
  s.item_full = s.empty + cfg::stages;
  s.item_empty = s.item_full + 2;
  s.items = reinterpret_cast<prefill_item*>(s.item_empty + 2);
  return s;
}

// Item n from its slot; every thread of the CTA reads it and then frees it for item n + 2 (an
// arrival per thread, so that each read is ordered before the slot's next write on its own).
template <int D>
__device__ __forceinline__ prefill_item read_item(const hopper_prefill_smem<D>& s, int n) {
  mbarrier_wait(&s.item_full[n % 2], (n / 2) & 1);
  const prefill_item t = s.items[n % 2];
  mbarrier_arrive(&s.item_empty[n % 2]);
  return t;
}

// The scheduler (the producer's first thread) fills item n's slot once every warp has read the
// item two before it.
template <int D>
__device__ __forceinline__ void publish_item(const attention_args& a,
                                             const hopper_prefill_smem<D>& s, int n) {
  if (n >= 2) mbarrier_wait(&s.item_empty[n % 2], ((n / 2) - 1) & 1);
  s.items[n % 2] = next_prefill_item(a, n, hopper_prefill_config<D>::bm);
  mbarrier_arrive(&s.item_full[n % 2]);
}

// The cache block of the 16 keys from key0, or a block id past the cache (its copy arrives as
// zeros) when the group is not the request's: outside [lo, hi], past the table, an invalid id.
__device__ __forceinline__ int kv_group_block(const attention_args& a, const int32_t* bt,
                                              const prefill_cta_keys& k, int key0) {
  const int page = key0 / a.block_size;
  if (key0 + 15 < k.lo || key0 > k.hi || page >= a.width) return static_cast<int>(a.num_blocks);
  const int b = bt[page];
  return b >= 0 && b < a.num_blocks ? b : static_cast<int>(a.num_blocks);
}

// The copies of group g (16 keys from key0, in cache block blk) of a key tile into stage s: per
// 64-column block one TMA copy of K and one of V, completing on the stage's full barrier.
template <int D>
__device__ __forceinline__ void issue_kv_group(const attention_args& a, int key0, int blk, int g,
                                               int kvh, int s, const CUtensorMap* k_map,
                                               const CUtensorMap* v_map, unsigned char* k_s,
                                               unsigned char* v_s, uint64_t* full) {
  using cfg = hopper_prefill_config<D>;
  const bool token_inner = a.stride_token < a.stride_head; // the maps' dimension order
  const int tok = key0 % a.block_size;
  const int c1 = token_inner ? tok : kvh, c2 = token_inner ? kvh : tok;
#pragma unroll
  for (int cb = 0; cb < D / 64; ++cb) {
    const size_t off = s * cfg::tile_bytes + size_t{cfg::bn} * 128 * cb + size_t{16} * 128 * g;
    tma_load_4d(k_s + off, k_map, 64 * cb, c1, c2, blk, &full[s]);
    tma_load_4d(v_s + off, v_map, 64 * cb, c1, c2, blk, &full[s]);
  }
}

// A producer warp: its groups of every key tile of an item into the ring, whose position carries
// on from the earlier items (`issued` tiles so far). The four warps of the producer warpgroup
// copy in parallel, warp w the groups from w * groups_per_warp: a TMA copy's operands sit in
// uniform registers, so the lanes of one warp issue their copies one after another, and one warp
// alone issued too slowly to keep the consumers fed. Each lane reads its group's block id before
// the warp waits for the stage to empty, so a tile pays one load latency, hidden behind the
// consumers' work; lane 0 announces the warp's bytes, then the group lanes copy.
template <int D>
__device__ __forceinline__ void produce_kv_tiles(const attention_args& a, const int32_t* bt,
                                                 const prefill_cta_keys& k, int kvh, int issued,
                                                 const CUtensorMap* k_map, const CUtensorMap* v_map,
                                                 const hopper_prefill_smem<D>& sm) {
  using cfg = hopper_prefill_config<D>;
  constexpr int per_warp = cfg::groups_per_producer_warp, stages = cfg::stages;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int g = (static_cast<int>(threadIdx.x) - cfg::consumers) / 32 * per_warp + lane;
#pragma unroll 1
  for (int it = 0; it < k.n_tiles; ++it) {
    const int ring = issued + it, s = ring % stages;
    const int key0 = (k.kt_first + it) * cfg::bn + 16 * g;
    const int blk = lane < per_warp ? kv_group_block(a, bt, k, key0) : 0;
    if (ring >= stages) mbarrier_wait(&sm.empty[s], ((ring / stages) - 1) & 1);
    if (lane == 0)
      mbarrier_arrive_expect_tx(&sm.full[s],
                                static_cast<uint32_t>(2 * per_warp * cfg::group_bytes));
    __syncwarp();
    if (lane < per_warp)
      issue_kv_group<D>(a, key0, blk, g, kvh, s, k_map, v_map, sm.k, sm.v, sm.full);
  }
}

// The producer warpgroup: item after item, each warp copies its part of the item's key tiles;
// the scheduler thread publishes the next item once its warp has issued this one's copies (the
// consumers are then still a few tiles behind, so the next item is ready before they need it).
template <int D>
__device__ __forceinline__ void run_producer(const attention_args& a, const CUtensorMap* k_map,
                                             const CUtensorMap* v_map,
                                             const hopper_prefill_smem<D>& sm) {
  using cfg = hopper_prefill_config<D>;
  warpgroup_registers_down<cfg::producer_registers>();
  const bool scheduler = threadIdx.x == cfg::consumers;
  if (scheduler) publish_item(a, sm, 0);
  __syncwarp();
  int issued = 0;
  for (int n = 0;; ++n) {
    const prefill_item t = read_item(sm, n);
    if (t.r < 0) return;
    const prefill_cta_keys keys = keys_of_item<D>(a, t);
    const int32_t* const bt = a.block_table + static_cast<int64_t>(t.r) * a.width;
    produce_kv_tiles<D>(a, bt, keys, t.h / a.group, issued, k_map, v_map, sm);
    issued += keys.n_tiles;
    if (scheduler) publish_item(a, sm, n + 1);
    __syncwarp();
  }
}

// Zeros the V rows of a tile whose keys lie outside [lo, hi] (the copies bring whole 16-key
// groups; a slot past the sequence may hold anything, and 0 * NaN would poison the output), then
// makes the writes visible to the MMAs of both warpgroups.
template <int D>
__device__ __forceinline__ void zero_outside_keys(unsigned char* vs, int k_start, int lo, int hi,
                                                  int ctid) {
  using cfg = hopper_prefill_config<D>;
  constexpr int bn = cfg::bn, chunks = D / 8;
  for (int c = ctid; c < bn * chunks; c += cfg::consumers) {
    const int rr = c / chunks, key = k_start + rr;
    if (key < lo || key > hi)
      *reinterpret_cast<uint4*>(vs + sw128_offset(rr, c % chunks, bn)) = make_uint4(0, 0, 0, 0);
  }
  fence_proxy_async();
  named_barrier_sync(1, cfg::consumers);
}

// A consumer warpgroup's 64 rows of an item's Q into its half of the Q tile (cp.async; rows past
// the tile arrive as zeros). Each warpgroup loads its own half once its last S = Q K^T of the
// previous item has completed, so the load runs under that item's last P V and output writes.
template <class T, int D>
__device__ __forceinline__ void load_q_rows(const attention_args& a, const prefill_item& t, int wg,
                                            unsigned char* q_s) {
  constexpr int chunks = D / 8, bm = hopper_prefill_config<D>::bm;
  const T* const q = static_cast<const T*>(a.q);
  for (int c = static_cast<int>(threadIdx.x % 128); c < 64 * chunks; c += 128) {
    const int rr = 64 * wg + c / chunks, ch = c % chunks;
    const bool ok = rr < t.rows;
    const T* const src =
        q + (static_cast<int64_t>(t.q_begin + t.q0 + rr) * a.num_q_heads + t.h) * D + ch * 8;
    cp_async_16(q_s + sw128_offset(rr, ch, bm), ok ? src : q, ok);
  }
  cp_async_commit();
}

// Waits for this warpgroup's Q rows and makes them visible to its MMAs.
__device__ __forceinline__ void wait_q_rows(int wg) {
  cp_async_wait<0>();
  fence_proxy_async();
  named_barrier_sync(2 + wg, 128);
}

// The normalised output rows of this thread (two per warp row group) of an item.
template <class T, int D, int Parts, int N>
__device__ __forceinline__ void write_rows(const attention_args& a, const prefill_item& t, int row0,
                                           int t4, const softmax_rows& sm,
                                           const float (&o)[Parts][N]) {
  using ops = mma_ops<T>;
  constexpr int n_o = hopper_prefill_config<D>::n_o;
  T* const out = static_cast<T*>(a.out);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int rr = row0 + 8 * i;
    const float sum = quad_sum(sm.l[i]);
    if (rr >= t.rows) continue;
    float acc_scale = 1.0f;
    const float inv = finish_row(a, t.h, sm.m[i], sum, &acc_scale) * acc_scale;
    T* const dst = out + (static_cast<int64_t>(t.q_begin + t.q0 + rr) * a.num_q_heads + t.h) * D;
#pragma unroll
    for (int p = 0; p < Parts; ++p) {
#pragma unroll
      for (int j = 0; j < n_o / 8; ++j) {
        const uint32_t v = ops::pack(o[p][4 * j + 2 * i] * inv, o[p][4 * j + 2 * i + 1] * inv);
        *reinterpret_cast<uint32_t*>(dst + p * n_o + j * 8 + 2 * t4) = v;
      }
    }
  }
}

// A consumer warpgroup's work on item n (t, whose keys are `keys`; its Q rows already loaded):
// every key tile, then the next item's Q rows, the last P V, the output rows. `consumed` is the
// ring's position (tiles of the earlier items). Returns item n + 1.
template <class T, int D>
__device__ __forceinline__ prefill_item attend_item(const attention_args& a,
                                                    const hopper_prefill_smem<D>& sm,
                                                    const prefill_item& t,
                                                    const prefill_cta_keys& keys, int n, int wg,
                                                    int consumed) {
  using cfg = hopper_prefill_config<D>;
  using ops = mma_ops<T>;
  constexpr int bm = cfg::bm, bn = cfg::bn, n_o = cfg::n_o, stages = cfg::stages;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = (tid % 128) / 32, lane = tid % 32;
  const int first_pos = t.seq - t.qlen + t.q0;

  // This warpgroup's rows [64 wg, 64 wg + 64) and the keys they see (keys_of_rows): uniform
  // across the warpgroup, as wgmma requires.
  const int w_rows = max(0, min(64, t.rows - 64 * wg));
  const rows_keys wk = keys_of_rows(a, first_pos + 64 * wg, w_rows, t.seq);
  const int g = lane >> 2, t4 = lane & 3;
  softmax_rows sm_rows = thread_rows(a, first_pos, 64 * wg + 16 * warp + g, t.rows, t.seq);

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
  const smem_desc q_desc = sw128_descriptor(sm.q + wg * 64 * 128, 16, 1024);

  // Per tile: S = Q K^T, then the previous tile's P V while this tile's softmax runs (the two
  // MMA groups complete in order: waiting for all but the newest leaves S done, P V in flight).
  // A stage is released once its P V completes; the producer warps refill it then. Tiles are
  // counted along the ring (consumed + it) for their stage and phase.
  uint32_t pa[bn / 16][4]; // P of tile `pending`, whose P V is not issued yet
  int pending = -1;
  auto issue_pv = [&](int tile) {
    const unsigned char* const vs = sm.v + (tile % stages) * cfg::tile_bytes;
    const smem_desc v_desc = sw128_descriptor(vs, static_cast<uint32_t>(bn * 128), 1024);
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < bn / 16; ++j) {
#pragma unroll
      for (int p = 0; p < cfg::o_parts; ++p) {
        const smem_desc db = v_desc + ((p * (n_o / 64) * bn * 128 + j * 16 * 128) >> 4);
        wgmma_ops<n_o, T>::rs(o[p], pa[j], db, 1);
      }
    }
    wgmma_commit();
  };
  auto release = [&](int tile) {
    if (lane == 0) mbarrier_arrive(&sm.empty[tile % stages]); // this warp is done with the stage
  };

  // Ping-pong: the warpgroups take turns to issue their MMAs (named barriers 4 and 5), so that
  // one's softmax runs under the other's MMAs. Every iteration takes a turn, seen tile or not, so
  // that the turns pair up within the item; the second warpgroup lets the first go first.
  auto take_turn = [&] { named_barrier_sync(4 + wg, 2 * 128); };
  auto pass_turn = [&](int it) {
    if (wg == 0 || it + 1 < keys.n_tiles) named_barrier_arrive(5 - wg, 2 * 128);
  };
  if (KVACTOR_PREFILL_BOUND != 1 && wg == 1 && keys.n_tiles > 0) named_barrier_arrive(4, 2 * 128);

  for (int it = 0; it < keys.n_tiles; ++it) {
    const int ring = consumed + it, st = ring % stages;
    const smem_desc k_desc = sw128_descriptor(sm.k + st * cfg::tile_bytes, 16, 1024);
    const int k_start = (keys.kt_first + it) * bn;
    const int k_end = k_start + bn - 1;
    mbarrier_wait(&sm.full[st], (ring / stages) & 1);
    if constexpr (KVACTOR_PREFILL_BOUND == 1) { // the K/V stream alone
      release(ring);
      continue;
    }
    if (k_start < keys.lo || k_end > keys.hi)
      zero_outside_keys<D>(sm.v + st * cfg::tile_bytes, k_start, keys.lo, keys.hi, tid);
    take_turn();
    if (k_end < wk.lo || k_start > wk.hi) { // none of this warpgroup's rows sees the tile
      if (pending >= 0) {
        issue_pv(pending);
        pass_turn(it);
        wgmma_wait<0>();
        fence_accumulators(o);
        release(pending);
        pending = -1;
      } else {
        pass_turn(it);
      }
      release(ring);
      continue;
    }
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      // Start addresses advance in the descriptors' low bits (16-byte units): 16 columns inside
      // a 64-column block, then the next block.
      const smem_desc da = q_desc + (((kk / 4) * bm * 128 + (kk % 4) * 32) >> 4);
      const smem_desc db = k_desc + (((kk / 4) * bn * 128 + (kk % 4) * 32) >> 4);
      wgmma_ops<bn, T>::ss(s, da, db, kk);
    }
    wgmma_commit();
    float alpha[2];
    const bool need_mask = w_rows < 64 || k_start < wk.lo_max || k_end > wk.hi_min;
    auto softmax = [&] {
      fence_accumulators(s);
      if constexpr (KVACTOR_PREFILL_BOUND == 2) { // everything but the softmax
        alpha[0] = alpha[1] = 1.0f;
        return;
      }
      online_softmax_tile<bn / 8, true>(
          a, [&](int jj, int e) -> float& { return s[4 * jj + e]; }, k_start, t4, need_mask,
          sm_rows, alpha);
    };
    // One branch on `pending` (two would leave the compiler a path where P V is still in flight
    // at the rescale, and it would serialise the MMAs to cover it).
    if (pending >= 0) {
      issue_pv(pending);
      pass_turn(it);
      wgmma_wait<1>();
      softmax();
      wgmma_wait<0>();
      fence_accumulators(o);
      release(pending);
    } else {
      pass_turn(it);
      wgmma_wait<0>();
      softmax();
    }
    // The lazy softmax keeps a row's scale (alpha exactly 1) on most tiles: a warp whose rows all
    // keep theirs skips the rescale.
    if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
      for (int p = 0; p < cfg::o_parts; ++p)
#pragma unroll
        for (int e = 0; e < n_o / 2; ++e)
          o[p][e] *= alpha[(e >> 1) & 1];
    }
#pragma unroll
    for (int j = 0; j < bn / 16; ++j) {
      pa[j][0] = ops::pack(s[8 * j], s[8 * j + 1]);
      pa[j][1] = ops::pack(s[8 * j + 2], s[8 * j + 3]);
      pa[j][2] = ops::pack(s[8 * j + 4], s[8 * j + 5]);
      pa[j][3] = ops::pack(s[8 * j + 6], s[8 * j + 7]);
    }
    pending = ring;
  }

  // Every S of the item has completed: this warpgroup's Q rows are free for the next item, whose
  // load runs under the last P V (one branch on `pending`, as above). A warp's wait covers its own
  // part of the MMAs only, and each thread loads rows that other warps' parts read: the
  // warpgroup meets first.
  auto next_item = [&] {
    const prefill_item next = read_item(sm, n + 1);
    named_barrier_sync(2 + wg, 128);
    if (next.r >= 0) load_q_rows<T, D>(a, next, wg, sm.q);
    return next;
  };
  prefill_item next;
  if (pending >= 0) {
    issue_pv(pending);
    next = next_item();
    wgmma_wait<0>();
    fence_accumulators(o);
    release(pending);
  } else {
    next = next_item();
  }
  write_rows<T, D>(a, t, 64 * wg + 16 * warp + g, t4, sm_rows, o);
  return next;
}

// The consumer warpgroups: item after item, each on its 64 rows of the item's tile.
template <class T, int D>
__device__ __forceinline__ void run_consumers(const attention_args& a,
                                              const hopper_prefill_smem<D>& sm) {
  using cfg = hopper_prefill_config<D>;
  warpgroup_registers_up<cfg::consumer_registers>();
  // Broadcast from lane 0: the compiler then knows the warpgroup is warp-uniform and keeps what
  // derives from it (the Q descriptor) in uniform registers, ready for the MMAs.
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
  prefill_item t = read_item(sm, 0);
  if (t.r >= 0) load_q_rows<T, D>(a, t, wg, sm.q);
  int consumed = 0;
  for (int n = 0; t.r >= 0; ++n) {
    wait_q_rows(wg);
    const prefill_cta_keys keys = keys_of_item<D>(a, t);
    t = attend_item<T, D>(a, sm, t, keys, n, wg, consumed);
    consumed += keys.n_tiles;
  }
}

template <class T, int D>
__device__ __forceinline__ void
hopper_prefill_body(const attention_args& a, const CUtensorMap* k_map, const CUtensorMap* v_map) {
  using cfg = hopper_prefill_config<D>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const hopper_prefill_smem<D> sm = carve_smem<D>(smem_raw);
  if (threadIdx.x == 0) {
    for (int i = 0; i < cfg::stages; ++i) {
      mbarrier_init(&sm.full[i], cfg::producer_warps);  // one arrival per producer warp
      mbarrier_init(&sm.empty[i], cfg::consumers / 32); // one arrival per consumer warp
    }
    for (int i = 0; i < 2; ++i) {
      mbarrier_init(&sm.item_full[i], 1);             // the scheduler
      mbarrier_init(&sm.item_empty[i], cfg::threads); // every thread has read the item
    }
    mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x >= cfg::consumers)
    run_producer<D>(a, k_map, v_map, sm);
  else
    run_consumers<T, D>(a, sm);
}

// Launched like the mma.sync kernel (see prefill_attention.cu): after the decode kernel, with
// PDL, computing at once and waiting for its predecessor only before exiting.
template <class T, int D>
__global__ void __launch_bounds__(hopper_prefill_config<D>::threads, 1)
    hopper_prefill_kernel(const attention_args a, const __grid_constant__ CUtensorMap k_map,
                          const __grid_constant__ CUtensorMap v_map) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  pdl_launch_dependents();
  hopper_prefill_body<T, D>(a, &k_map, &v_map);
  pdl_wait_for_predecessor();
#else
  __trap(); // the host launches it only on a 9.0 device of an sm_90a build
#endif
}

using encode_tiled_fn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                     const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                     const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                     CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled from the driver, found once through the runtime (no link to libcuda).
encode_tiled_fn tensor_map_encoder() {
  static const encode_tiled_fn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q)
            != cudaSuccess
        || q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      f = nullptr;
    }
    return reinterpret_cast<encode_tiled_fn>(f);
  }();
  return fn;
}

// The map of one of K or V (base at `offset` elements into every cache entry) with 64-column,
// 16-token boxes swizzled like wgmma.cuh's tiles. Dimensions: content, then token and KV head in
// the order of their strides (the kernel follows the same order), then block.
cuda_status make_kv_map(const attention_args& a, bool bf16, int32_t offset, CUtensorMap* map) {
  const encode_tiled_fn encode = tensor_map_encoder();
  if (encode == nullptr)
    return detail::invalid_cuda_argument("hopper prefill attention: the driver has no "
                                         "cuTensorMapEncodeTiled");
  const bool token_inner = a.stride_token < a.stride_head;
  const cuuint64_t tokens = static_cast<cuuint64_t>(a.block_size);
  const cuuint64_t heads = static_cast<cuuint64_t>(a.num_kv_heads);
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(a.head_size), token_inner ? tokens : heads,
                              token_inner ? heads : tokens, static_cast<cuuint64_t>(a.num_blocks)};
  const auto token_bytes = static_cast<cuuint64_t>(a.stride_token) * 2;
  const auto head_bytes = static_cast<cuuint64_t>(a.stride_head) * 2;
  const cuuint64_t strides[3] = {token_inner ? token_bytes : head_bytes,
                                 token_inner ? head_bytes : token_bytes,
                                 static_cast<cuuint64_t>(a.stride_block) * 2};
  const cuuint32_t box[4] = {64, token_inner ? 16u : 1u, token_inner ? 1u : 16u, 1};
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  void* const base = const_cast<unsigned char*>(static_cast<const unsigned char*>(a.cache))
                     + static_cast<size_t>(offset) * 2;
  const CUresult r = encode(
      map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, base, dims,
      strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return detail::invalid_cuda_argument("hopper prefill attention: cuTensorMapEncodeTiled "
                                         "failed (CUresult ",
                                         static_cast<int>(r), ") for the cache view");
  return {};
}

// make_kv_map, remembered per thread: a decoder step asks for the same two maps of every layer's
// cache step after step, and encoding them is host work on the launch path.
cuda_status cached_kv_map(const attention_args& a, bool bf16, int32_t offset, CUtensorMap* map) {
  using key = std::tuple<const void*, int32_t, bool, int32_t, int32_t, int32_t, int64_t, int64_t,
                         int64_t, int64_t>;
  struct key_hash {
    size_t operator()(const key& k) const {
      size_t h = std::hash<const void*>{}(std::get<0>(k));
      for (int64_t v : {int64_t{std::get<1>(k)}, int64_t{std::get<3>(k)}, int64_t{std::get<4>(k)},
                        int64_t{std::get<5>(k)}, std::get<6>(k), std::get<7>(k), std::get<8>(k),
                        std::get<9>(k)})
        h = h * 1000003u ^ std::hash<int64_t>{}(v);
      return h ^ std::get<2>(k);
    }
  };
  thread_local std::unordered_map<key, CUtensorMap, key_hash> maps;
  const key k{a.cache,        offset,       bf16,           a.head_size,   a.block_size,
              a.num_kv_heads, a.num_blocks, a.stride_block, a.stride_head, a.stride_token};
  if (auto it = maps.find(k); it != maps.end()) {
    *map = it->second;
    return {};
  }
  if (cuda_status s = make_kv_map(a, bf16, offset, map); !s) return s;
  if (maps.size() >= 4096) maps.clear(); // many caches come and go (tests): start over
  maps.emplace(k, *map);
  return {};
}

} // namespace

int32_t hopper_prefill_ctas_per_sm() {
  return 1;
}

cuda_status launch_prefill_attention_hopper(const attention_args& a, bool bf16, dim3 grid, bool pdl,
                                            cudaStream_t stream) {
  CUtensorMap k_map, v_map;
  if (cuda_status s = cached_kv_map(a, bf16, 0, &k_map); !s) return s;
  if (cuda_status s = cached_kv_map(a, bf16, a.v_offset, &v_map); !s) return s;
  auto launch = [&](auto type) {
    using T = typename decltype(type)::type;
    return dispatch_head_size("hopper prefill attention", a.head_size, [&](auto head_size) {
      constexpr int D = decltype(head_size)::value;
      if constexpr (D == 96) {
        return detail::invalid_cuda_argument("hopper prefill attention: head_size 96 is not "
                                             "instantiated");
      } else {
        using cfg = hopper_prefill_config<D>;
        auto* const kernel = hopper_prefill_kernel<T, D>;
        KVACTOR_CUDA_CALL(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(cfg::smem_bytes)));
        KVACTOR_CUDA_CALL(
            launch_ex(kernel, grid, cfg::threads, cfg::smem_bytes, pdl, stream, a, k_map, v_map));
        return cuda_status{};
      }
    });
  };
  return dispatch_half_type(bf16, launch);
}

} // namespace kvactor::kernels::cuda_detail
