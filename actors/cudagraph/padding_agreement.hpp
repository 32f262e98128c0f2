// Ranks that each dispatched their own batch agree on one padded size, so that every rank
// replays the same graph (or all run eagerly): docs/vllm-semantics.md §8.2. Pure C++: the caller
// exchanges the rows (encode_row on every rank, one gather, decode_rows) and every rank computes
// the same answer from them. Tensor-parallel GPU ranks run it live at every step.
#pragma once

#include <cstdint>
#include <vector>

#include "actors/cudagraph/dispatcher.hpp"
#include "messages/cudagraph.hpp"

namespace kvactor {

/// What one rank reports: its batch and the mode its local dispatch wanted.
struct padding_row {
  int32_t num_tokens = 0;
  cudagraph_mode mode = cudagraph_mode::none; // runtime mode: none, piecewise or full
  int32_t uniform_token_count = 0;            // 0 = not uniform
  int32_t max_query_len = -1;                 // -1 = none
  bool allow_ubatching = false;
  int32_t num_reqs = 0;
  bool alive = true; // a dead rank never vetoes (it counts as max mode, max uniform)
};

struct padding_agreement {
  bool skip = false;         // every rank has 0 tokens: nothing runs
  bool eager = false;        // every rank runs eagerly with its own token count
  bool microbatch = false;   // every rank runs eager microbatches of synced_tokens
  int32_t synced_tokens = 0; // the max over ranks (graph or microbatch case)
  int32_t uniform_token_count = 0;
  int32_t max_query_len = -1;
  batch_descriptor own;      // this rank's re-dispatch (graph case)
  int32_t padded_tokens = 0; // every rank's num_tokens_across_dp entry
  bool redispatch = false;   // graph case: re-dispatch (own num_reqs, synced_tokens, uniform)
};

/// One row as the ranks exchange it (7 values), and a gathered table back into rows.
std::vector<int64_t> encode_row(const padding_row& row);
/// REQUIRES: table.size() is a multiple of 7.
std::vector<padding_row> decode_rows(const std::vector<int64_t>& table);

/// agree_padding without the re-dispatch: in the graph case `redispatch` is set, `own` left
/// empty and `padded_tokens` is synced_tokens; the caller asks its dispatcher.
padding_agreement agree_padding_rows(const std::vector<padding_row>& rows, int32_t self,
                                     int32_t ubatch_threshold);

/// The newest rule (dispatch_cg_and_sync_dp): all zero -> skip; all allow ubatching and the
/// smallest rank passes `ubatch_threshold` -> microbatched eager at the max; agreed uniform count
/// if identical and non-zero; agreed mode = the minimum; none -> eager; else every rank
/// re-dispatches (own num_reqs, max tokens, agreed uniform, agreed bound) with `dispatcher`.
/// REQUIRES: 0 <= self < rows.size().
padding_agreement agree_padding(const std::vector<padding_row>& rows, int32_t self,
                                const graph_dispatcher& dispatcher, int32_t ubatch_threshold);

} // namespace kvactor
