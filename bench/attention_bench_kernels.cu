#include "attention_bench_kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

namespace kvactor::bench {
namespace {

constexpr int threads = 256;
constexpr unsigned max_grid = 132u * 16u; // grid-stride loops: a few waves on any current GPU

unsigned grid_for(size_t items) {
  const size_t blocks = (items + threads - 1) / threads;
  return static_cast<unsigned>(blocks < max_grid ? (blocks > 0 ? blocks : 1) : max_grid);
}

__device__ uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Four values per hash, one from each 16-bit lane: (k + 0.5) / 32768 - 1 is never 0.
__global__ void fill_uniform_kernel(uint16_t* data, size_t n, float range, uint64_t seed) {
  const size_t groups = (n + 3) / 4;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t g = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; g < groups;
       g += stride) {
    const uint64_t h = splitmix64(seed * 0x2545f4914f6cdd1dull + g);
    for (int lane = 0; lane < 4; ++lane) {
      const size_t i = g * 4 + static_cast<size_t>(lane);
      if (i >= n) break;
      const auto k = static_cast<uint32_t>((h >> (16 * lane)) & 0xffffu);
      const float x = ((static_cast<float>(k) + 0.5f) / 32768.0f - 1.0f) * range;
      data[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x));
    }
  }
}

// Eight FP8 E4M3 codes per hash, of values uniform in (-range, range) before rounding (never NaN).
__global__ void fill_uniform_fp8_kernel(uint8_t* data, size_t n, float range, uint64_t seed) {
  const size_t groups = (n + 7) / 8;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t g = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; g < groups;
       g += stride) {
    const uint64_t h = splitmix64(seed * 0x2545f4914f6cdd1dull + g);
    for (int lane = 0; lane < 8; ++lane) {
      const size_t i = g * 8 + static_cast<size_t>(lane);
      if (i >= n) break;
      const auto k = static_cast<uint32_t>((h >> (8 * lane)) & 0xffu);
      const float x = ((static_cast<float>(k) + 0.5f) / 128.0f - 1.0f) * range;
      data[i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    }
  }
}

__global__ void read_sweep_kernel(const uint4* __restrict__ data, size_t n, uint32_t* sink) {
  uint32_t acc = 0;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const uint4 v = data[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;
}

__global__ void count_nonfinite_kernel(const uint16_t* data, size_t n, unsigned long long* count) {
  unsigned long long local = 0;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    local += (data[i] & 0x7f80u) == 0x7f80u; // exponent all ones: infinity or NaN
  if (local > 0) atomicAdd(count, local);
}

__global__ void gather_entries_kernel(const uint16_t* src, const int64_t* offsets,
                                      int64_t num_entries, int32_t entry_elems, uint16_t* dst) {
  for (int64_t e = blockIdx.x; e < num_entries; e += gridDim.x) {
    const int64_t off = offsets[e];
    uint16_t* out = dst + e * entry_elems;
    for (int32_t x = static_cast<int32_t>(threadIdx.x); x < entry_elems;
         x += static_cast<int32_t>(blockDim.x))
      out[x] = off >= 0 ? src[off + x] : uint16_t{0};
  }
}

} // namespace

cudaError_t fill_uniform_bf16(uint16_t* data, size_t n, float range, uint64_t seed,
                              cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  fill_uniform_kernel<<<grid_for((n + 3) / 4), threads, 0, stream>>>(data, n, range, seed);
  return cudaGetLastError();
}

cudaError_t fill_uniform_fp8(uint8_t* data, size_t n, float range, uint64_t seed,
                             cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  fill_uniform_fp8_kernel<<<grid_for((n + 7) / 8), threads, 0, stream>>>(data, n, range, seed);
  return cudaGetLastError();
}

cudaError_t read_sweep(const void* data, size_t bytes, uint32_t* sink, cudaStream_t stream) {
  const size_t n = bytes / sizeof(uint4);
  if (n == 0) return cudaSuccess;
  read_sweep_kernel<<<grid_for(n), threads, 0, stream>>>(static_cast<const uint4*>(data), n, sink);
  return cudaGetLastError();
}

cudaError_t count_nonfinite_bf16(const uint16_t* data, size_t n, unsigned long long* count,
                                 cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  count_nonfinite_kernel<<<grid_for(n), threads, 0, stream>>>(data, n, count);
  return cudaGetLastError();
}

cudaError_t gather_entries(const uint16_t* src, const int64_t* offsets, int64_t num_entries,
                           int32_t entry_elems, uint16_t* dst, cudaStream_t stream) {
  if (num_entries <= 0) return cudaSuccess;
  const auto blocks = static_cast<unsigned>(num_entries < 65535 ? num_entries : 65535);
  gather_entries_kernel<<<blocks, 128, 0, stream>>>(src, offsets, num_entries, entry_elems, dst);
  return cudaGetLastError();
}

} // namespace kvactor::bench
