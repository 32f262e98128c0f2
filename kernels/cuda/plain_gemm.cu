// The projection GEMM without cuBLAS (decoder_ops.h's launch_plain_gemm), for runs under
// compute-sanitizer's racecheck: the tool faults ("failed to handle a hardware exception") when
// cuBLAS's Hopper GEMM runs without its instrumentation, so a run that instruments only kvactor's
// kernels, or only some launches, must not run cuBLAS at all. Correct at any shape, not fast: a
// warp per output element, no shared memory (nothing for racecheck to track, so it stays cheap
// under the tool).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "decoder_ops.h"
#include "dense_math.cuh"
#include "launch_utils.cuh"

namespace kvactor::kernels::cuda_detail {
namespace {

constexpr int plain_warps = 8;
constexpr int64_t plain_max_blocks = 4096; // larger problems grid-stride

__device__ __forceinline__ float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ float to_float(__half v) {
  return __half2float(v);
}

// y[t, row] = sum_c w[row, c] x[t, c]: each warp takes outputs (t, row) in turn, its lanes
// striding over c, summed over the warp.
template <class E>
__global__ void __launch_bounds__(plain_warps * 32)
    plain_gemm_kernel(const E* w, const E* x, float* y, int32_t tokens, int32_t in, int32_t out) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t warps = int64_t{gridDim.x} * plain_warps;
  const int64_t jobs = int64_t{tokens} * out;
  for (int64_t job = blockIdx.x * int64_t{plain_warps} + threadIdx.x / 32; job < jobs;
       job += warps) {
    const int64_t t = job / out, row = job % out;
    const E* wr = w + row * in;
    const E* xt = x + t * in;
    float acc = 0.0f;
    for (int32_t c = lane; c < in; c += 32)
      acc = fmaf(to_float(wr[c]), to_float(xt[c]), acc);
    acc = warp_sum(acc);
    if (lane == 0) y[t * out + row] = acc;
  }
}

template <class E>
cuda_status launch_plain(const void* w, const void* x, float* y, int32_t tokens, int32_t in,
                         int32_t out, cudaStream_t stream) {
  const int64_t jobs = int64_t{tokens} * out;
  const auto blocks =
      static_cast<unsigned>(std::min((jobs + plain_warps - 1) / plain_warps, plain_max_blocks));
  // A plain launch: it waits for the kernel before it, and a dependent after it waits for all of
  // it (it never signals early).
  KVACTOR_CUDA_CALL(launch_ex(plain_gemm_kernel<E>, dim3(blocks), plain_warps * 32, 0, false,
                              stream, static_cast<const E*>(w), static_cast<const E*>(x), y, tokens,
                              in, out));
  return {};
}

} // namespace

cuda_status launch_plain_gemm(bool bf16, const void* w, const void* x, float* y, int32_t num_tokens,
                              int32_t in, int32_t out, cudaStream_t stream) {
  KVACTOR_CUDA_CHECK_ARG(num_tokens >= 0 && in > 0 && out > 0, "plain_gemm: num_tokens ",
                         num_tokens, ", in ", in, " or out ", out, " out of range");
  if (num_tokens == 0) return {};
  return bf16 ? launch_plain<__nv_bfloat16>(w, x, y, num_tokens, in, out, stream)
              : launch_plain<__half>(w, x, y, num_tokens, in, out, stream);
}

} // namespace kvactor::kernels::cuda_detail
