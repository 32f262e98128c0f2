// Microbatch (DBO) slices and the split of common metadata into per-ubatch metadata
// (docs/vllm-semantics.md §8.1). Pure C++, no CAF.
#pragma once

#include <cstdint>
#include <vector>

#include "actors/metadata/common_metadata.hpp"
#include "messages/errc.hpp"

namespace kvactor {

/// Tokens [token_start, token_end) of a batch and the requests [req_start, req_end) they belong
/// to. A request may straddle two slices: then it is the last request of one and the first of
/// the next.
struct ubatch_slice {
  int32_t token_start = 0;
  int32_t token_end = 0;
  int32_t req_start = 0;
  int32_t req_end = 0;

  int32_t num_tokens() const { return token_end - token_start; }
  int32_t num_reqs() const { return req_end - req_start; }
  bool operator==(const ubatch_slice&) const = default;
};

/// The slices of one batch: `slices` cover the scheduled tokens; `padded` is the same list with
/// the last slice stretched to [last.token_start, num_tokens_padded) tokens and
/// [last.req_start, num_reqs_padded) requests (what a padded FULL graph runs).
struct ubatch_slices {
  std::vector<ubatch_slice> slices;
  std::vector<ubatch_slice> padded;

  bool operator==(const ubatch_slices&) const = default;
};

/// Splits the batch into k slices at the token offsets split_point * i (i = 1..k-1);
/// split_point 0 means num_tokens_padded / k. A slice's requests start at the request holding
/// its first token and stop at the first request starting at or after its end.
/// Fails with errc::invalid_argument (naming the field and value) when k < 1, a scheduled count
/// is negative, num_tokens_padded is below the scheduled total, num_reqs_padded is below the
/// request count, split_point is negative, or a slice would be empty (the last one is whenever
/// is_last_ubatch_empty holds: such a batch must not be microbatched).
expected<ubatch_slices> make_ubatch_slices(const std::vector<int32_t>& num_scheduled_tokens,
                                           int32_t num_tokens_padded, int32_t num_reqs_padded,
                                           int32_t k, int32_t split_point = 0);

/// Whether splitting num_tokens_padded tokens into k even slices leaves the last slice without
/// any of the orig_num_tokens real tokens: (padded / k) * (k - 1) >= orig. REQUIRES: k >= 1.
bool is_last_ubatch_empty(int32_t orig_num_tokens, int32_t num_tokens_padded, int32_t k);

/// One common metadata per slice (split_attn_metadata): query_start_loc re-based to 0 with the
/// tokens of a first request that began in an earlier slice skipped; a last request that
/// continues in the next slice has its query and its seq_len shortened by the tokens it leaves
/// (the input is never modified); block-table rows, is_prefilling, slot mapping and positions
/// sliced; num_actual_tokens = the slice's token count; max_query_len recomputed (the original
/// when every slice query is 0, as in dummy runs); max_seq_len = max(the slice's largest
/// seq_len, the original), because the original may be a worst-case bound a captured graph
/// relies on. Fast-prefill fields are never armed under microbatching (§1.2).
/// Fails with errc::invalid_argument when `common` is invalid (see validate), carries fast-prefill
/// fields, or a slice is empty, out of range or starts before its first request. Tokens outside
/// a slice's requests are not an error: padding tokens and dummy runs (all-zero
/// query_start_loc) have them.
expected<std::vector<common_attention_metadata>>
split_metadata(const std::vector<ubatch_slice>& slices, const common_attention_metadata& common);

} // namespace kvactor
