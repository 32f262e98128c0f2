// How a rank splits one step among its builders, and what it tells the graph manager about the
// batch (pure: no CAF).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "actors/metadata/step_batch.hpp"
#include "messages/cudagraph.hpp"
#include "messages/runtime.hpp"

namespace kvactor {

/// The builders' work for step `seq`: two slices when the plan asks for two ubatches, the rank
/// has two builders and the batch splits without an empty slice (make_ubatch_slices); otherwise
/// one slice over the whole batch. Slices cover the batch's tokens and requests in order.
/// REQUIRES: b.num_tokens() > 0.
std::vector<ubatch_work> slice_step(const step_batch& b, uint64_t seq, int32_t requested_ubatches,
                                    size_t num_builders);

/// 1 when every request of the batch decodes exactly one token (a uniform decode batch, which
/// FULL graphs serve), else 0.
int32_t uniform_decode(const step_batch& b);

/// What runs when a rank has no graphs: the whole batch, eagerly, as one ubatch.
batch_descriptor eager_step(const step_batch& b);

} // namespace kvactor
