// Reference paged attention over a mixed batch (prefill chunks and decodes together).
//
// NOTE(determinism): the result for one query token depends only on that token's q, its request's
// cache contents and the parameters, never on which other tokens share the batch; every sum runs
// in a fixed order (dims ascending, keys in ascending position). Splitting a batch into
// microbatches therefore gives bit-identical outputs.
#pragma once

#include <cstdint>

#include "kvactor/kernels/kv_cache_view.h"

namespace kvactor::kernels {

struct attention_params {
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0; // must equal the view's num_heads; q head h reads h / (Hq / Hkv)
  int32_t head_size = 0;    // score dims: q . k over content[0, head_size)
  // V = content[v_offset, v_offset + v_size). Normal attention: v_offset = head_size.
  // MLA: v_offset = 0, v_size = kv_lora_rank (V is a prefix of the latent).
  int32_t v_offset = 0;
  int32_t v_size = 0;
  float scale = 1.0f;           // applied to q . k before the softcap
  int32_t sliding_window = 0;   // 0 = none: key j visible to the query at position p iff p - j < W
  int32_t chunk_size = 0;       // 0 = none: key j visible iff j / C == p / C
  float softcap = 0.0f;         // 0 = none: s = softcap * tanh(s / softcap)
  const float* sinks = nullptr; // [num_q_heads] or nullptr: a logit in the denominator only
  // Causal: key j visible iff j <= p. Non-causal (encoder): every key of the sequence, with the
  // window symmetric (|p - j| < W) and the chunk rule unchanged.
  bool causal = true;
};

/// For request r with query_len = query_start_loc[r + 1] - query_start_loc[r], query i (token
/// t = query_start_loc[r] + i) sits at position p = seq_lens[r] - query_len + i and attends to
/// the visible keys among positions [0, seq_lens[r]) of its request, read through the block
/// table: position j lives in kernel block block_table[r * width + j / block_size] at offset
/// j % block_size. Per query and q head, in float:
///   s_j = softcap(scale * q . k_j);  m = max(max_j s_j, sink)
///   out = sum_j exp(s_j - m) v_j / (sum_j exp(s_j - m) + exp(sink - m))   (no sink: drop it)
///
///   q               // [num_tokens, num_q_heads, head_size]
///   query_start_loc // [num_reqs + 1] indptr, query_start_loc[0] == 0
///   seq_lens        // [num_reqs] tokens in the cache, this step's included
///   block_table     // [num_reqs, width] kernel block ids
///   out             // [num_tokens, num_q_heads, v_size]
///
/// K and V are the stored elements times key_scale / value_scale of the view (FP8; MLA's V, a
/// prefix of the latent, takes k_scale).
/// Rows of q/out at or past query_start_loc[num_reqs] are padding: not read, not written. Only
/// block ids holding a visible key are read (and checked), so entries a sliding window has
/// released may hold anything.
/// Throws std::invalid_argument before computing when an argument is inconsistent.
void paged_attention(const attention_params& params, const kv_view& view, const float* q,
                     const int32_t* query_start_loc, const int32_t* seq_lens,
                     const int32_t* block_table, int32_t width, int32_t num_reqs, float* out);

/// Runs exactly the argument checks of paged_attention and nothing else, so that a caller can
/// validate a whole step before it writes anything.
void check_paged_attention(const attention_params& params, const kv_view& view, const float* q,
                           const int32_t* query_start_loc, const int32_t* seq_lens,
                           const int32_t* block_table, int32_t width, int32_t num_reqs,
                           const float* out);

/// The checks of `params` against `view` that every paged-attention entry point makes, in two
/// parts that throw std::invalid_argument "WHO: argument: value ..." (WHO the entry point).
/// Heads and sizes: heads positive, num_q_heads a multiple of num_kv_heads, num_kv_heads the
/// view's num_heads, head_size and V inside the view's content.
void check_attention_sizes(const attention_params& params, const kv_view& view, const char* who);
/// Scores and masking: a finite scale, window and chunk not negative, a finite softcap >= 0.
/// (Neither part reads the sinks, which a device implementation holds in device memory.)
void check_attention_scores(const attention_params& params, const char* who);

/// The keys visible to the query at position p of a sequence of seq_len tokens: [*lo, *hi]
/// (the visibility rules above always leave a contiguous range, and it always holds p).
void visible_keys(const attention_params& params, int32_t p, int32_t seq_len, int32_t* lo,
                  int32_t* hi);

} // namespace kvactor::kernels
