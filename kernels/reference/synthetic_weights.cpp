#include "kvactor/kernels/synthetic_weights.h"

namespace kvactor::kernels {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

float synthetic_uniform(uint64_t seed, weight_matrix matrix, int32_t layer, int64_t row,
                        int64_t col) {
  uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ static_cast<uint64_t>(matrix));
  h = splitmix64(h ^ static_cast<uint64_t>(static_cast<int64_t>(layer)));
  h = splitmix64(h ^ static_cast<uint64_t>(row));
  h = splitmix64(h ^ static_cast<uint64_t>(col));
  const auto bits = static_cast<int32_t>(h >> 40); // 24 bits
  return static_cast<float>(bits - (1 << 23)) * (1.0f / static_cast<float>(1 << 23));
}

} // namespace kvactor::kernels
