// Deterministic pseudo-random weights of the synthetic attention stack. Each element is a pure
// function of (seed, matrix, layer, global row, global col), so the slice a tensor-parallel rank
// materialises is exactly the corresponding slice of the TP = 1 matrix, and no state is shared.
#pragma once

#include <cstdint>

namespace kvactor::kernels {

/// Which matrix an element belongs to. Matrices are [in, out] (row = input index, col = output
/// index: y = x . W), globally indexed over all heads of the model.
enum class weight_matrix : uint64_t {
  embedding = 1, // [vocab-like token id, hidden]: row = token id
  q = 2,         // [hidden, total_q_heads * head_size]
  k = 3,         // [hidden, total_kv_heads * head_size]
  v = 4,         // [hidden, total_kv_heads * head_size_v]
  o = 5,         // [total_q_heads * v_size, hidden]
  kv_latent = 6, // MLA: [hidden, head_size]
  vocab = 7,     // [hidden, vocab_size]
  sinks = 8,     // [total_q_heads, 1]
};

/// splitmix64's finaliser: a bijective 64-bit mix.
uint64_t splitmix64(uint64_t x);

/// Uniform in [-1, 1) with 24 random bits (exact in float), from the hash chain
/// splitmix64(... splitmix64(splitmix64(seed) ^ matrix) ^ layer ... ^ col).
float synthetic_uniform(uint64_t seed, weight_matrix matrix, int32_t layer, int64_t row,
                        int64_t col);

} // namespace kvactor::kernels
