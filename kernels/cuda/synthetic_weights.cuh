// Internal: the synthetic weight hash of synthetic_weights.h as __host__ __device__ functions, so
// that weights generated on the device carry the bits the CPU reference computes. Only integer
// operations, one exact int -> float conversion and a multiplication by a power of two: the
// result does not depend on where it runs.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kvactor::kernels::cuda_detail {

/// splitmix64's finaliser (synthetic_weights.h).
__host__ __device__ __forceinline__ uint64_t splitmix64_hd(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// synthetic_uniform of synthetic_weights.h, with the matrix as its enum value.
__host__ __device__ __forceinline__ float
synthetic_uniform_hd(uint64_t seed, uint64_t matrix, int32_t layer, int64_t row, int64_t col) {
  uint64_t h = splitmix64_hd(seed);
  h = splitmix64_hd(h ^ matrix);
  h = splitmix64_hd(h ^ static_cast<uint64_t>(static_cast<int64_t>(layer)));
  h = splitmix64_hd(h ^ static_cast<uint64_t>(row));
  h = splitmix64_hd(h ^ static_cast<uint64_t>(col));
  const auto bits = static_cast<int32_t>(h >> 40); // 24 bits
  return static_cast<float>(bits - (1 << 23)) * (1.0f / static_cast<float>(1 << 23));
}

} // namespace kvactor::kernels::cuda_detail
