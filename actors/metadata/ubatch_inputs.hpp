// One builder's view of a step: the slice [token_start, token_end) x [req_start, req_end) of the
// step's batch, re-based as docs/vllm-semantics.md §8.1 splits metadata (a request may straddle
// slices).
#pragma once

#include <vector>

#include "actors/metadata/builder.hpp"
#include "actors/metadata/step_batch.hpp"
#include "messages/runtime.hpp"

namespace kvactor {

/// The attention inputs of one slice for every KV cache group. Block tables and positions view
/// the batch; slot mappings (computed with each group's kernel block size) are written into
/// `slot_buffers` ([num_groups], owned by the builder, capacity reused). Fails naming the field
/// when the slice is outside the batch.
expected<attention_inputs> slice_inputs(const step_batch& batch, const ubatch_work& work,
                                        const std::vector<group_geometry>& groups,
                                        std::vector<std::vector<int64_t>>& slot_buffers);

} // namespace kvactor
