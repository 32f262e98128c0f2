// Fast prefill for KV-sharing (YOCO) layers (docs/vllm-semantics.md §1.2, §5.8): layers that only
// read a KV cache written by an earlier layer need to compute only the tokens that produce
// logits. Pure C++, no CAF.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "actors/cudagraph/dispatcher.hpp"
#include "actors/metadata/common_metadata.hpp"
#include "messages/cudagraph.hpp"
#include "messages/errc.hpp"

namespace kvactor {

/// What prepare() hands to build_attention_metadata for one step.
struct fast_prefill_metadata {
  std::vector<int32_t> logits_indices_padded; // [padded] buf[0:padded] of the helper
  int32_t num_logits_indices = 0;             // n, the real indices (a prefix of the above)
  int32_t max_logits_per_req = 0;             // max over requests of their logits count

  bool operator==(const fast_prefill_metadata&) const = default;
};

/// Owns the persistent index buffer (its address never changes, so piecewise graphs may read
/// it). One helper per rank; not thread-safe.
class fast_prefill_helper {
public:
  /// REQUIRES: max_num_tokens >= 1 (max_num_batched_tokens).
  explicit fast_prefill_helper(int32_t max_num_tokens);

  /// Disarmed (returns an empty optional) when the batch has no prefill, runs a FULL graph
  /// (desc.mode == full) or is microbatched (desc.num_ubatches > 1). Otherwise copies the n
  /// indices into buf[0:n], fills buf[n:] with the last index (stale tail entries stay valid
  /// token indices), dispatches (num_reqs, n tokens, not uniform, no LoRA) to learn the padded
  /// length min(dispatched num_tokens, max_num_tokens), and returns buf[0:padded], n and
  /// max_logits_per_req = max(diff(cu_num_logits)).
  /// Fails with errc::invalid_argument when armed and logits_indices is empty or longer than
  /// max_num_tokens, num_reqs < 1, or cu_num_logits does not have num_reqs + 1 entries; the
  /// buffer is untouched then.
  /// REQUIRES: num_reqs <= the dispatcher's max_num_seqs.
  expected<std::optional<fast_prefill_metadata>>
  prepare(std::span<const int32_t> logits_indices, // [n] token index of each logits row
          int32_t num_reqs,
          std::span<const int32_t> cu_num_logits, // [num_reqs + 1] logits rows per request
          bool has_prefill, const batch_descriptor& desc, const graph_dispatcher& dispatcher);

  /// [max_num_tokens] the persistent buffer.
  std::span<const int32_t> buffer() const { return buf_; }

private:
  std::vector<int32_t> buf_; // [max_num_tokens]
};

/// §5.8: the common metadata a fast-prefill layer runs with. Unchanged when max_query_len == 1
/// (all decode). Otherwise each of the first num_logits_indices logits indices is bucketed into
/// the request whose query range holds it; query_start_loc becomes [0, cumsum(counts)],
/// num_actual_tokens = the number of indices, max_query_len = the largest count; seq_lens,
/// block table and slot mapping stay. Example: query_start_loc [0,15,20,28], indices
/// [14,18,19,27] => counts [1,2,1], query_start_loc [0,1,3,4].
/// Fails with errc::invalid_argument when `common` is invalid (see validate), fast prefill is not
/// armed (num_logits_indices == 0), or an index lies outside [0, query_start_loc[num_reqs]).
expected<common_attention_metadata> rewrite_for_fast_prefill(common_attention_metadata common);

} // namespace kvactor
