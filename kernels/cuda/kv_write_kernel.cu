// KV write kernel: one CTA per token; its threads copy the token's K and V rows of every head
// into the cache entry, 8 elements (16 bytes) per access when everything is aligned for it.
#include "device_utils.cuh"
#include "kv_write_args.h"
#include "launch_utils.cuh"

namespace kvactor::kernels::cuda_detail {
namespace {

// Elem: uint4 (8 elements) or uint16_t (1).
template <class Elem>
__global__ void __launch_bounds__(128) kv_write_kernel(const kv_write_args a) {
  // Launched as a programmatic dependent: wait for the kernel that made k and v, then let the
  // attention kernel be scheduled (it waits for us before reading the cache).
  pdl_wait_for_predecessor();
  pdl_launch_dependents();
  constexpr int per = sizeof(Elem) / sizeof(uint16_t);
  const int64_t t = blockIdx.x;
  const int64_t slot = a.slot_mapping[t];
  if (slot < 0 || slot >= a.capacity) return; // -1: padding; past the cache: never written
  const int64_t block = slot / a.block_size;
  const int64_t offset = slot % a.block_size;
  const int k_chunks = a.head_size / per;
  const int row_chunks = k_chunks + a.head_size_v / per;
  for (int i = static_cast<int>(threadIdx.x); i < a.num_heads * row_chunks;
       i += static_cast<int>(blockDim.x)) {
    const int h = i / row_chunks, c = i % row_chunks;
    uint16_t* const dst =
        a.cache + block * a.stride_block + h * a.stride_head + offset * a.stride_token + c * per;
    const uint16_t* const src =
        c < k_chunks ? a.k + (t * a.num_heads + h) * a.head_size + c * per
                     : a.v + (t * a.num_heads + h) * a.head_size_v + (c - k_chunks) * per;
    *reinterpret_cast<Elem*>(dst) = *reinterpret_cast<const Elem*>(src);
  }
}

} // namespace

cuda_status launch_kv_write(const kv_write_args& a, bool vectorized, cudaStream_t stream) {
  // A programmatic dependent: the kernel waits for its predecessor before it reads.
  KVACTOR_CUDA_CALL(launch_ex(vectorized ? kv_write_kernel<uint4> : kv_write_kernel<uint16_t>,
                              dim3(static_cast<unsigned>(a.num_tokens)), 128, 0, true, stream, a));
  return {};
}

} // namespace kvactor::kernels::cuda_detail
