// Common attention metadata (a subset of docs/vllm-semantics.md §5.5) and the decode/prefill
// split (§5.6). Pure C++, no CAF. Host-side std::vector buffers stand in for the device buffers a
// builder fills.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "messages/errc.hpp"

namespace kvactor {

/// Per-batch metadata shared by every attention group of one KV cache group; each backend's
/// builder turns it into its own metadata. Requests are in batch order, decodes first.
struct common_attention_metadata {
  std::vector<int32_t> query_start_loc; // [num_reqs + 1] indptr of each request's query tokens
  std::vector<int32_t> seq_lens;        // [num_reqs] computed tokens + this step's query
  int32_t num_reqs = 0;
  int32_t num_actual_tokens = 0; // may include padding (FULL graphs pass padded counts)
  int32_t max_query_len = 0;
  int32_t max_seq_len = 0; // may be an upper bound (max_model_len while capturing)
  // NOTE(metadata): the three large arrays are views into persistent buffers (the rank's batch,
  // the builder's slot buffers) whose addresses never change, as vLLM's metadata views device
  // tensors: a build copies no block table, and a CUDA graph can replay the same addresses.
  // [num_reqs x block_table_width] row-major kernel block ids; padding rows are 0 (null block).
  std::span<const int32_t> block_table;
  int32_t block_table_width = 0;
  std::span<const int64_t> slot_mapping; // [>= num_actual_tokens] -1 = padding (no KV write)
  std::span<const int64_t> positions;    // [>= num_actual_tokens] or empty when not given
  bool causal = true;
  std::vector<bool> is_prefilling; // [num_reqs] computed < prompt length; empty when not given
  // Fast prefill (KV sharing, §1.2 / §5.8); num_logits_indices == 0 means not armed.
  std::vector<int32_t> logits_indices_padded; // [padded] token indices that produce logits
  int32_t num_logits_indices = 0;             // the real ones, a prefix of the padded list
  int32_t max_logits_per_req = 0;

  bool has_fast_prefill() const { return num_logits_indices > 0; }
  /// REQUIRES: 0 <= i < num_reqs and query_start_loc has num_reqs + 1 entries.
  int32_t query_len(int32_t i) const {
    auto k = static_cast<size_t>(i);
    return query_start_loc[k + 1] - query_start_loc[k];
  }
  /// [block_table_width] the kernel block ids of request i. REQUIRES: 0 <= i < num_reqs.
  std::span<const int32_t> block_table_row(int32_t i) const {
    auto w = static_cast<size_t>(block_table_width);
    return block_table.subspan(static_cast<size_t>(i) * w, w);
  }

  /// Equal values (views compare by content).
  friend bool operator==(const common_attention_metadata& a, const common_attention_metadata& b);
};

/// Checks that every buffer has the shape its comment states and that query_start_loc starts
/// at 0, never decreases and ends at or before num_actual_tokens. Fails with
/// errc::invalid_argument naming the first field at fault and its value.
status validate(const common_attention_metadata& m);

/// How a batch divides into leading decode requests and trailing prefill requests.
struct decode_prefill_split {
  int32_t num_decodes = 0;
  int32_t num_prefills = 0;
  int32_t num_decode_tokens = 0;
  int32_t num_prefill_tokens = 0; // num_actual_tokens - num_decode_tokens (includes padding)

  bool operator==(const decode_prefill_split&) const = default;
};

/// §5.6. Requests with query_len <= decode_threshold at the front are decodes. All decode when
/// max_query_len <= decode_threshold (unless require_uniform with a threshold above 1); all
/// prefill when the first request is above the threshold; otherwise the split is the first
/// request whose query_len is above the threshold or 0 (padding), or, with require_uniform,
/// differs from the first request's. Fails with errc::invalid_argument when query_start_loc does
/// not have num_reqs + 1 entries or decode_threshold is negative.
expected<decode_prefill_split> split_decodes_and_prefills(const common_attention_metadata& m,
                                                          int32_t decode_threshold = 1,
                                                          bool require_uniform = false);

} // namespace kvactor
