// Internal: what the host side of paged_attention_cuda hands to the kernels' launch functions.
// Plain data, passed by value as the kernels' parameter. Compiled as C++17 by nvcc: no header
// of kvactor/kernels/ but cuda/cuda_check.h is included here.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kvactor/kernels/cuda/cuda_check.h"

namespace kvactor::kernels::cuda_detail {

/// Rows of one decode CTA: a request's (query token, q head of the GQA group) pairs, 16 at most.
constexpr int32_t decode_rows = 16;
/// Query tokens of one prefill CTA: the mma.sync kernel's, and the Hopper (wgmma) kernel's.
constexpr int32_t prefill_tile = 64;
constexpr int32_t hopper_prefill_tile = 128;
constexpr float log2e_host = 1.4426950408889634f;

/// True when the decode kernel handles a request of query_len tokens (the prefill kernel the
/// others): its rows fit one CTA, or it is a single token (whose group may take several CTAs).
__host__ __device__ inline bool is_decode_request(int32_t query_len, int32_t group) {
  return query_len == 1 || (query_len > 0 && query_len * group <= decode_rows);
}

struct attention_args {
  const void* q;     // [num_tokens, num_q_heads, head_size]
  void* out;         // [num_tokens, num_q_heads, v_size]
  const void* cache; // view.base
  int64_t stride_block, stride_head, stride_token;
  int64_t num_blocks;
  int32_t block_size;
  const int32_t* query_start_loc; // [num_reqs + 1]
  const int32_t* seq_lens;        // [num_reqs]
  const int32_t* block_table;     // [num_reqs, width]
  int32_t width, num_reqs, num_tokens;
  int32_t num_q_heads, num_kv_heads, group;
  int32_t head_size, v_offset, v_size;
  // Scores in log2 units: s2 = softcap > 0 ? softcap_log2 * tanh(qk * score_scale)
  //                                        : qk * score_scale
  float score_scale; // scale * log2(e), or scale / softcap with a softcap
  float softcap;
  float softcap_log2; // softcap * log2(e)
  // Every output row is multiplied by this: V's scale of an FP8 cache, else 1 (K's scale is in
  // score_scale).
  float out_scale;
  int32_t sliding_window, chunk_size, causal;
  const float* sinks; // [num_q_heads] natural-log units, or nullptr
  // Split-KV: num_splits CTAs share one row's keys; with more than one, each writes its
  // unnormalised partial result and the merge kernel combines them. Partial rows are indexed
  //   decode: ((r * num_kv_heads * row_chunks + kv_head * row_chunks + chunk) * 16 + row)
  //   MLA:    (token * num_q_heads + q_head)
  // times num_splits, plus the split.
  int32_t num_splits;
  // decode: > 0: split s owns the 16-key sub-tiles [s * split_subtiles, (s + 1) * split_subtiles)
  // of every request (no window or chunk: keys start at 0, and a CTA can read its block ids before
  // it knows its request's length); 0: the splits share each request's visible keys evenly.
  int32_t split_subtiles;
  int32_t row_chunks; // decode: CTAs along the rows of one KV head (ceil(group / 16))
  float* partial_out; // [partial rows, num_splits, v_size] sum of p v
  float* partial_ml;  // [partial rows, num_splits, 2]: max (log2 units), sum of p
  // decode with splits: arrivals per row group (r * num_kv_heads * row_chunks + y), zero
  // between calls; the last split CTA of a group merges the group's rows and resets it.
  int32_t* split_counters;
  // Hopper prefill: tile slots (num_tokens / hopper_prefill_tile + num_reqs); with a schedule,
  // the persistent grid's two counters (next item, CTAs out of work), zero between calls.
  int32_t prefill_slots;
  int32_t* prefill_schedule;
};

/// Bytes at the start of a workspace that hold the decode kernel's split counters: a fixed
/// region, so that counters zeroed once stay where every later call looks for them.
constexpr size_t split_counter_bytes = 16384;
/// The last two counters of that region belong to the Hopper prefill's persistent schedule; the
/// decode kernel's row groups use the ones before.
constexpr int32_t prefill_schedule_counters = 2;
constexpr int32_t split_counter_slots =
    static_cast<int32_t>(split_counter_bytes / sizeof(int32_t)) - prefill_schedule_counters;

// One launch function per kernel; each dispatches on the element type (bf16, else f16) and the
// head size, which the host side has checked. With pdl, the kernel is launched as a programmatic
// dependent of the previous kernel of the stream (see each kernel for how it waits).
// fp8: the cache holds FP8 E4M3 codes (then q and out are bf16, and bf16 is ignored).
/// grid: (num_reqs, num_kv_heads * row_chunks, num_splits).
cuda_status launch_decode_attention(const attention_args& a, bool bf16, bool fp8, dim3 grid,
                                    bool pdl, cudaStream_t stream);
/// grid: (num_tokens / prefill_tile + num_reqs, num_q_heads).
cuda_status launch_prefill_attention(const attention_args& a, bool bf16, bool fp8, dim3 grid,
                                     bool pdl, cudaStream_t stream);
/// The wgmma kernel (sm_90a; bf16 or f16 cache, head size 64, 128 or 256). With
/// a.prefill_schedule, a persistent grid: (min(items, multiprocessors * ctas per SM)); without:
/// (a.prefill_slots, num_q_heads).
cuda_status launch_prefill_attention_hopper(const attention_args& a, bool bf16, dim3 grid, bool pdl,
                                            cudaStream_t stream);
/// Hopper prefill CTAs resident on one multiprocessor, for its persistent grid.
int32_t hopper_prefill_ctas_per_sm();
/// grid: (num_tokens, ceil(num_q_heads / 16), num_splits).
cuda_status launch_mla_decode(const attention_args& a, bool bf16, dim3 grid, cudaStream_t stream);
/// Combines the MLA kernel's split partial results. Launched with pdl; waits for its predecessor
/// before reading.
cuda_status launch_merge_splits(const attention_args& a, bool bf16, cudaStream_t stream);

/// MLA kernel CTAs resident on one multiprocessor (by their shared memory), for planning.
int32_t mla_ctas_per_sm();

} // namespace kvactor::kernels::cuda_detail
