// Shared helpers for the driver core tests: KV cache groups of each kind.
#pragma once

#include <string>
#include <vector>

#include "messages/kv.hpp"

namespace kvactor::test {

inline kv_cache_group full_group(int32_t block_size, std::string layer = "full.0") {
  return {{std::move(layer)}, full_attention_spec(block_size, 8, 128, dtype::bfloat16)};
}

inline kv_cache_group sliding_group(int32_t block_size, int32_t window,
                                    std::string layer = "swa.0") {
  return {{std::move(layer)}, sliding_window_spec(block_size, 8, 128, dtype::bfloat16, window)};
}

inline kv_cache_group mamba_group(int32_t block_size, std::string layer = "mamba.0") {
  return {{std::move(layer)}, mamba_spec(block_size, {{16, 64}}, {dtype::bfloat16})};
}

inline kv_cache_group chunked_group(int32_t block_size, int32_t chunk,
                                    std::string layer = "local.0") {
  return {{std::move(layer)}, chunked_local_spec(block_size, 8, 128, dtype::bfloat16, chunk)};
}

} // namespace kvactor::test
