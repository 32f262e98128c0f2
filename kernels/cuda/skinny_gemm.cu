// The projections of single-token steps (decoder_ops.h's launch_skinny_gemm and
// launch_skinny_gated_mlp). They are memory-bound: every weight byte is read once, so a launch
// takes the weight bytes over the bandwidth it reaches. One warp per output row streams the row
// with 16-byte loads for all the tokens; a row's bits do not depend on the grid or the batch, and
// the gated form gives the bits of the plain form followed by the activation.
//
// Why plain loads and no shared-memory pipeline: staging the rows through shared memory with
// bulk copies (a producer thread, a ring of stages) reached 2.0-3.0 TB/s at the 8B model's
// shapes on an H200 where these direct 16-byte loads reach 3.1-4.1 TB/s (kvactor_skinny_bench).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <map>

#include "decoder_ops.h"
#include "dense_math.cuh"
#include "device_utils.cuh"
#include "launch_utils.cuh"

namespace kvactor::kernels::cuda_detail {
namespace {

// Eight bf16 of a 16-byte chunk, dotted in float.
__device__ __forceinline__ float dot8(const uint4& a, const uint4& b) {
  const __nv_bfloat162* pa = reinterpret_cast<const __nv_bfloat162*>(&a);
  const __nv_bfloat162* pb = reinterpret_cast<const __nv_bfloat162*>(&b);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 fa = __bfloat1622float2(pa[i]), fb = __bfloat1622float2(pb[i]);
    s = fmaf(fa.x, fb.x, s);
    s = fmaf(fa.y, fb.y, s);
  }
  return s;
}

// Weights are read once: no L1 allocation, so the activations (re-read by every warp) stay.
__device__ __forceinline__ uint4 load_streaming(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

constexpr int skinny_warps = 8;
constexpr int skinny_unroll = 4; // 16-byte weight loads in flight per lane

// The first skinny_unroll chunks a lane reads of a weight row, exactly when skinny_row's first
// unrolled step runs for that lane (lane + 32 (skinny_unroll - 1) < chunks; a row of 97 to 127
// chunks once ran it on registers never loaded for lanes below 29). They do not depend on the
// kernel before the projection, so the kernels below load them before waiting for it (programmatic
// dependent launch): the weight stream starts while that kernel (a norm, the attention) is still
// running.
__device__ __forceinline__ void skinny_head(const uint4* wr, int32_t chunks, int lane,
                                            uint4 (&wv)[skinny_unroll]) {
  if (lane + 32 * (skinny_unroll - 1) >= chunks) return;
#pragma unroll
  for (int u = 0; u < skinny_unroll; ++u)
    wv[u] = load_streaming(wr + lane + 32 * u);
}

// One output row of the skinny GEMM for N tokens, summed over the warp (every lane gets it),
// starting from the chunks skinny_head loaded into wv: the one accumulation order both skinny
// kernels use, so fusing changes no bit.
template <int N>
__device__ __forceinline__ void skinny_row(const uint4* wr, const uint4* x, int32_t chunks,
                                           int lane, uint4 (&wv)[skinny_unroll], float (&acc)[N]) {
#pragma unroll
  for (int t = 0; t < N; ++t)
    acc[t] = 0.0f;
  int c = lane;
  for (bool loaded = true; c + 32 * (skinny_unroll - 1) < chunks; c += 32 * skinny_unroll) {
    if (!loaded) {
#pragma unroll
      for (int u = 0; u < skinny_unroll; ++u)
        wv[u] = load_streaming(wr + c + 32 * u);
    }
    loaded = false;
#pragma unroll
    for (int u = 0; u < skinny_unroll; ++u)
#pragma unroll
      for (int t = 0; t < N; ++t)
        acc[t] += dot8(wv[u], __ldg(x + int64_t{t} * chunks + c + 32 * u));
  }
  for (; c < chunks; c += 32) {
    const uint4 w1 = load_streaming(wr + c);
#pragma unroll
    for (int t = 0; t < N; ++t)
      acc[t] += dot8(w1, __ldg(x + int64_t{t} * chunks + c));
  }
#pragma unroll
  for (int t = 0; t < N; ++t)
    acc[t] = warp_sum(acc[t]);
}

// y[t, row] = sum_c w[row, c] x[t, c] for N tokens: a warp per output row, 16-byte streaming
// loads of the weights (each read once), x from the cache.
template <int N>
__global__ void __launch_bounds__(skinny_warps * 32)
    skinny_gemm_kernel(const uint4* w, const uint4* x, float* y, int32_t chunks, int32_t out) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t warp = blockIdx.x * int64_t{skinny_warps} + threadIdx.x / 32;
  const int64_t warps = int64_t{gridDim.x} * skinny_warps;
  uint4 wv[skinny_unroll];
  if (warp < out) skinny_head(w + warp * chunks, chunks, lane, wv);
  pdl_wait_for_predecessor(); // x is its output; it may still read what y overwrites
  pdl_launch_dependents();
  for (int64_t row = warp; row < out; row += warps) {
    if (row != warp) skinny_head(w + row * chunks, chunks, lane, wv);
    float acc[N];
    skinny_row<N>(w + row * chunks, x, chunks, lane, wv, acc);
    if (lane == 0)
#pragma unroll
      for (int t = 0; t < N; ++t)
        y[int64_t{t} * out + row] = acc[t];
  }
}

// The gate/up projection and the gated activation in one pass: a warp computes gate row i and
// up row inter + i and writes the activation, with the unfused kernels' bits.
template <int N>
__global__ void __launch_bounds__(skinny_warps * 32)
    skinny_gated_kernel(const uint4* w, const uint4* x, __nv_bfloat16* out, int32_t chunks,
                        int32_t inter, bool gelu_tanh) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t warp = blockIdx.x * int64_t{skinny_warps} + threadIdx.x / 32;
  const int64_t warps = int64_t{gridDim.x} * skinny_warps;
  uint4 wg[skinny_unroll], wu[skinny_unroll];
  if (warp < inter) {
    skinny_head(w + warp * chunks, chunks, lane, wg);
    skinny_head(w + (inter + warp) * chunks, chunks, lane, wu);
  }
  pdl_wait_for_predecessor();
  pdl_launch_dependents();
  for (int64_t i = warp; i < inter; i += warps) {
    if (i != warp) {
      skinny_head(w + i * chunks, chunks, lane, wg);
      skinny_head(w + (inter + i) * chunks, chunks, lane, wu);
    }
    float gate[N], up[N];
    skinny_row<N>(w + i * chunks, x, chunks, lane, wg, gate);
    skinny_row<N>(w + (inter + i) * chunks, x, chunks, lane, wu, up);
    if (lane == 0)
#pragma unroll
      for (int t = 0; t < N; ++t)
        out[int64_t{t} * inter + i] = __float2bfloat16_rn(gated(gate[t], up[t], gelu_tanh));
  }
}

// The current device's multiprocessors (asked once per device and thread; 132, an H100/H200's,
// if it cannot say): the skinny kernel's grid-stride cap. Speed only: a row's bits do not depend
// on the grid.
int multiprocessors() {
  thread_local std::map<int, int> counts;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 132;
  auto [it, fresh] = counts.emplace(device, 132);
  int n = 0;
  if (fresh && cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) == cudaSuccess
      && n > 0)
    it->second = n;
  return it->second;
}

unsigned skinny_grid(int64_t rows) {
  // At most 16 CTAs per multiprocessor (a warp per row); larger matrices grid-stride.
  return static_cast<unsigned>(
      std::min<int64_t>((rows + skinny_warps - 1) / skinny_warps, int64_t{multiprocessors()} * 16));
}

template <int N>
cuda_status launch_skinny(const void* w, const void* x, float* y, int32_t in, int32_t out,
                          cudaStream_t stream) {
  KVACTOR_CUDA_CALL(launch_dependent(skinny_gemm_kernel<N>, dim3(skinny_grid(out)),
                                     skinny_warps * 32, stream, static_cast<const uint4*>(w),
                                     static_cast<const uint4*>(x), y, in / 8, out));
  return {};
}

template <int N>
cuda_status launch_skinny_gated(const void* w, const void* x, void* out, int32_t in, int32_t inter,
                                bool gelu_tanh, cudaStream_t stream) {
  KVACTOR_CUDA_CALL(launch_dependent(skinny_gated_kernel<N>, dim3(skinny_grid(inter)),
                                     skinny_warps * 32, stream, static_cast<const uint4*>(w),
                                     static_cast<const uint4*>(x), static_cast<__nv_bfloat16*>(out),
                                     in / 8, inter, gelu_tanh));
  return {};
}

// The checks of both public launchers; the message names the launcher.
cuda_status check_projection(const char* what, int32_t num_tokens, int32_t in, int32_t rows) {
  KVACTOR_CUDA_CHECK_ARG(num_tokens >= 1 && num_tokens <= skinny_max_tokens && in % 8 == 0 && in > 0
                             && rows > 0,
                         what, ": num_tokens ", num_tokens, " outside [1, ", skinny_max_tokens,
                         "], in ", in, " not a positive multiple of 8, or ", rows, " rows");
  return {};
}

} // namespace

cuda_status launch_skinny_gemm(const void* w, const void* x, float* y, int32_t num_tokens,
                               int32_t in, int32_t out, cudaStream_t stream) {
  if (auto st = check_projection("skinny_gemm", num_tokens, in, out); !st) return st;
  switch (num_tokens) {
  case 1: return launch_skinny<1>(w, x, y, in, out, stream);
  case 2: return launch_skinny<2>(w, x, y, in, out, stream);
  case 3: return launch_skinny<3>(w, x, y, in, out, stream);
  default: return launch_skinny<4>(w, x, y, in, out, stream);
  }
}

cuda_status launch_skinny_gated_mlp(const void* gate_up, const void* x, void* out,
                                    int32_t num_tokens, int32_t in, int32_t inter, bool gelu_tanh,
                                    cudaStream_t stream) {
  if (auto st = check_projection("skinny_gated_mlp", num_tokens, in, inter); !st) return st;
  switch (num_tokens) {
  case 1: return launch_skinny_gated<1>(gate_up, x, out, in, inter, gelu_tanh, stream);
  case 2: return launch_skinny_gated<2>(gate_up, x, out, in, inter, gelu_tanh, stream);
  case 3: return launch_skinny_gated<3>(gate_up, x, out, in, inter, gelu_tanh, stream);
  default: return launch_skinny_gated<4>(gate_up, x, out, in, inter, gelu_tanh, stream);
  }
}

} // namespace kvactor::kernels::cuda_detail
