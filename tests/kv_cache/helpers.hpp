// Spec builders in the shape of vLLM's test helpers: bs 16, 2 heads, head size 64, fp32.
#pragma once

#include <string>
#include <vector>

#include "actors/kv_cache/layer_specs.hpp"
#include "messages/kv.hpp"

namespace kvactor::test {

// P0 = 16 tokens x 2 heads x (64 + 64) x 4 bytes = 16,384 bytes.
inline constexpr int64_t p0 = 16 * 2 * 64 * 4 * 2;

inline kv_cache_spec full(int32_t heads = 2, int32_t head_size = 64, int32_t window = 0,
                          int32_t bs = 16) {
  return full_attention_spec(bs, heads, head_size, dtype::float32, window);
}

inline kv_cache_spec sw(int32_t window = 1, int32_t head_size = 64, int32_t bs = 16) {
  return sliding_window_spec(bs, 2, head_size, dtype::float32, window);
}

inline layer_spec_list layers(std::vector<kv_cache_spec> specs) {
  layer_spec_list out;
  for (size_t i = 0; i < specs.size(); ++i)
    out.push_back({"layer_" + std::to_string(i + 1), specs[i]});
  return out;
}

inline memory_limits limits_of(int64_t max_model_len = 16, int64_t in_flight = 2048) {
  memory_limits lim;
  lim.max_model_len = max_model_len;
  lim.max_in_flight_tokens = in_flight;
  return lim;
}

} // namespace kvactor::test
