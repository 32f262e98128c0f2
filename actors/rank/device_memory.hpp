// The KV cache memory of a GPU rank: one plain cudaMalloc per planned tensor.
#pragma once

#include "actors/kv_cache/allocation.hpp"

namespace kvactor {

/// Device memory from kernels::device_buffer; in a build without CUDA every allocation fails
/// with the reason.
kv_memory_factory device_kv_memory();

} // namespace kvactor
