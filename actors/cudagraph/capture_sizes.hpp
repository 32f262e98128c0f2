// Which token counts get a CUDA graph (docs/vllm-semantics.md §7.2). Pure C++, no CAF.
#pragma once

#include <cstdint>
#include <vector>

#include "messages/errc.hpp"

namespace kvactor {

/// The default ladder: max = min(max_num_seqs * 2 * uniform_decode_query_len, 512), clipped to
/// max_num_batched_tokens; sizes [1,2,4] + 8,16,...,248 + 256,272,... (step 16), all <= max.
/// Returns the sizes ascending; empty if max < 1.
/// REQUIRES: max_num_seqs > 0, max_num_batched_tokens > 0, uniform_decode_query_len > 0.
std::vector<int32_t> default_capture_sizes(int32_t max_num_seqs, int32_t max_num_batched_tokens,
                                           int32_t uniform_decode_query_len = 1);

/// A user-given list: de-duplicated, values > max_num_batched_tokens dropped, sorted ascending.
/// Fails with errc::invalid_argument (naming --cudagraph-capture-sizes and the value) on a
/// size <= 0. The result may be empty when every size exceeds max_num_batched_tokens.
expected<std::vector<int32_t>> normalize_capture_sizes(std::vector<int32_t> sizes,
                                                       int32_t max_num_batched_tokens);

} // namespace kvactor
