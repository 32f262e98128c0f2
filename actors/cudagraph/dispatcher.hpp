// Runtime dispatch of a batch to a captured CUDA graph or eager mode (docs/vllm-semantics.md
// §7.4-§7.6). Pure C++, no CAF.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "messages/cudagraph.hpp"

namespace kvactor {

/// q if every one of num_reqs requests has q tokens (num_tokens == q * num_reqs, num_reqs > 0),
/// else 0 (not a uniform batch).
int32_t uniform_token_count(int32_t num_reqs, int32_t num_tokens, int32_t q);

/// Whether captured descriptor `d` can replay a batch with these runtime values (§7.4).
/// `lora_case` is the captured LoRA case the batch maps to, not its raw count.
bool compatible(const batch_descriptor& d, int32_t num_reqs, int32_t num_tokens,
                int32_t uniform_token_count, int32_t lora_case, int32_t max_query_len,
                int32_t num_ubatches);

/// Picks the graph for a batch. Candidate lists per token count are precomputed from the plan:
/// FULL descriptors with T >= n (ascending T; within one T uniform ones first, then those with a
/// max_query_len bound, then those with a request count, smaller counts first), followed by
/// PIECEWISE descriptors with T >= n (ascending). Immutable after construction, so one
/// dispatcher may serve several builders.
class graph_dispatcher {
public:
  /// REQUIRES: max_num_seqs > 0.
  graph_dispatcher(const cudagraph_plan& plan, int32_t max_num_seqs);

  /// The first compatible candidate for num_tokens, or eager: {none, num_tokens, num_reqs,
  /// loras = num_active_loras, ubatches = num_ubatches}, i.e. no padding. Eager when
  /// num_tokens <= 0, above the largest captured size, or when no candidate fits.
  /// max_query_len 0 means unknown (descriptors with a bound then do not match).
  /// REQUIRES: num_reqs <= max_num_seqs.
  batch_descriptor dispatch(int32_t num_reqs, int32_t num_tokens, int32_t uniform_token_count,
                            int32_t num_active_loras = 0, int32_t max_query_len = 0,
                            int32_t num_ubatches = 1) const;

  /// The largest captured num_tokens (0 without graphs).
  int32_t max_num_tokens() const { return static_cast<int32_t>(first_.size()) - 1; }

private:
  int32_t lora_case(int32_t num_active_loras) const;

  int32_t max_num_seqs_;
  std::vector<batch_descriptor> full_;      // candidate order (see class comment)
  std::vector<batch_descriptor> piecewise_; // ascending num_tokens
  // [max_num_tokens + 1] (first index into full_, first index into piecewise_) with T >= n;
  // the candidates for n are the suffixes from there.
  std::vector<std::pair<size_t, size_t>> first_;
  std::vector<int32_t> lora_cases_; // captured active-LoRA counts, ascending
};

} // namespace kvactor
