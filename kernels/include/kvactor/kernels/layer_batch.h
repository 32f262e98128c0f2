// One layer's attention metadata for a step, as the CPU decoder reads it (host pointers into the
// metadata a builder made for the layer's KV cache group).
#pragma once

#include <cstdint>

namespace kvactor::kernels {

struct layer_batch {
  const int32_t* query_start_loc = nullptr; // [num_reqs + 1]; tokens past the last are padding
  const int32_t* seq_lens = nullptr;        // [num_reqs] tokens in the cache incl. this step's
  const int32_t* block_table = nullptr;     // [num_reqs, width] kernel block ids
  int32_t width = 0;
  int32_t num_reqs = 0;
  const int64_t* slot_mapping = nullptr; // [num_tokens]; -1 = padding (not written)
};

} // namespace kvactor::kernels
