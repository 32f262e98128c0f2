// The KV cache memory of a GPU rank: one plain cudaMalloc per planned tensor.
#pragma once

#include "actors/kv_cache/allocation.hpp"

namespace kvactor {

/// Device memory from kernels::device_buffer on GPU `ordinal` (made current on the allocating
/// thread: the kv_cache actor runs on any scheduler thread); in a build without CUDA every
/// allocation fails with the reason.
kv_memory_factory device_kv_memory(int32_t ordinal = 0);

} // namespace kvactor
