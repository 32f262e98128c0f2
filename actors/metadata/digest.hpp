// A 64-bit digest of the attention metadata a builder produced: replay compares it with the
// recording, so a metadata divergence is caught at the builder rather than later in the tokens.
#pragma once

#include <cstdint>

#include "actors/metadata/builder.hpp"

namespace kvactor {

/// Hashes, per layer in name order, the backend and the common metadata that kernels read:
/// query_start_loc, seq_lens, the used block-table rows, the slot mapping of the actual tokens,
/// positions, counts, causality and the fast-prefill indices. Never 0 (0 means "not computed").
uint64_t metadata_digest(const layer_metadata& layers);

} // namespace kvactor
