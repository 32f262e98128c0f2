// Tensor-parallel ranks with CUDA graphs agree at every step on what they replay
// (docs/vllm-semantics.md §8.2): each reports its batch and what it dispatched, one gather hands
// every rank every row, and all reach the same decision. No CAF: the rank actor calls it.
#pragma once

#include <vector>

#include "actors/cudagraph/padding_agreement.hpp"
#include "actors/metadata/step_batch.hpp"
#include "kvactor/comm/communicator.h"
#include "messages/cudagraph.hpp"

namespace kvactor {

/// What this rank reports for the padding agreement: its batch and what it dispatched.
padding_row padding_row_of(const step_batch& b, const batch_descriptor& dispatched);

/// The agreement over every rank's row (docs/vllm-semantics.md §8.2). `unanimous`: every rank
/// dispatched the same, so each runs what it dispatched; otherwise `agreement` says what runs
/// (skip, eager, or a re-dispatch to synced_tokens).
struct padding_sync {
  bool unanimous = true;
  padding_agreement agreement;
};
padding_sync settle_padding(const std::vector<padding_row>& rows, int32_t self);

/// Exchanges this rank's row with its peers (one gather on the communicator, blocking) and
/// settles. Throws comm::collective_error when the exchange fails.
padding_sync sync_padding(comm::communicator& comm, const step_batch& b,
                          const batch_descriptor& dispatched);

} // namespace kvactor
