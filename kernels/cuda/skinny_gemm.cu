// The projections of single-token steps (decoder_ops.h's launch_skinny_gemm and
// launch_skinny_gated_mlp). They are memory-bound: every weight byte is read once, so a launch
// takes the weight bytes over the bandwidth it reaches. Two kernels:
//  - streamed (sm_90): a CTA per multiprocessor streams its contiguous share of the rows through
//    shared memory with the copy engine, from before the previous kernel ends; the many short
//    loads of the other kernel left the small projections (q/k/v, o) at 2.9-3.5 TB/s;
//  - warp per row: older devices, and rows too long for two stages of shared memory.
// Each gives a row the same bits in any grid and batch, and its gated form the bits of its plain
// form followed by the activation; the two kernels sum in different orders.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>

#include "decoder_ops.h"
#include "dense_math.cuh"
#include "device_utils.cuh"
#include "launch_utils.cuh"
#include "tma.cuh"

namespace kvactor::kernels::cuda_detail {
namespace {

// ---- The warp-per-row kernel
// ---------------------------------------------------------------------

constexpr int skinny_warps = 8;
constexpr int skinny_unroll = 4; // 16-byte weight loads in flight per lane

// The first skinny_unroll chunks a lane reads of a weight row (nothing when the row is shorter
// than one unrolled step). They do not depend on the kernel before the projection, so the
// kernels below load them before waiting for it (programmatic dependent launch): the weight
// stream starts while that kernel (a norm, the attention) is still running.
__device__ __forceinline__ void skinny_head(const uint4* wr, int32_t chunks, int lane,
                                            uint4 (&wv)[skinny_unroll]) {
  if (chunks < 32 * skinny_unroll) return;
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
cuda_status launch_warp_per_row(const void* w, const void* x, float* y, int32_t in, int32_t out,
                                cudaStream_t stream) {
  KVACTOR_CUDA_CALL(launch_dependent(skinny_gemm_kernel<N>, dim3(skinny_grid(out)),
                                     skinny_warps * 32, stream, static_cast<const uint4*>(w),
                                     static_cast<const uint4*>(x), y, in / 8, out));
  return {};
}

template <int N>
cuda_status launch_warp_per_row_gated(const void* w, const void* x, void* out, int32_t in,
                                      int32_t inter, bool gelu_tanh, cudaStream_t stream) {
  KVACTOR_CUDA_CALL(launch_dependent(skinny_gated_kernel<N>, dim3(skinny_grid(inter)),
                                     skinny_warps * 32, stream, static_cast<const uint4*>(w),
                                     static_cast<const uint4*>(x), static_cast<__nv_bfloat16*>(out),
                                     in / 8, inter, gelu_tanh));
  return {};
}

// ---- The streamed kernel ------------------------------------------------------------------------
//
// One CTA per multiprocessor owns the contiguous rows [begin, end) of the weight matrix (of the
// gate and of the up half, for the gated kernel). Its producer thread copies them, a stage of
// stage_rows rows at a time, into a ring of shared-memory stages with bulk copies, and starts
// before the previous kernel ends: the weights do not depend on it. The eight consumer warps wait
// for that kernel once (x is its output). Then each warp takes the same slice of columns of every
// row of a stage (lane chunks warp * 32 + lane + 256 k), sums it over its lanes and leaves the
// sum in the stage's slot of sums; warp u % 8 adds the eight sums of stage u's rows in warp order
// and writes them. Warps never wait for each other but for that: each stage has three barriers,
// `full` (the copy landed), `summed` (the eight sums are written) and `empty` (the eight warps
// have read the weights and the adding warp the sums: the producer may refill the slot).

constexpr int streamed_consumer_warps = 8;
constexpr int streamed_consumers = streamed_consumer_warps * 32;
constexpr int streamed_threads = streamed_consumers + 32; // + the producer's warp
constexpr int32_t streamed_stage_bytes = 16 * 1024;       // rows per stage: as many as fit
constexpr int32_t streamed_ring_bytes = 128 * 1024;       // in flight per multiprocessor
constexpr int32_t streamed_max_stage_rows = 32;
constexpr int32_t streamed_max_stages = 8;

// What the host planned for one launch. The shared memory holds, in order, the ring
// (stages x stage_rows x halves x chunks x 16 bytes), the barriers (3 x stages) and a slot of
// sums per stage (stage_rows x halves x N x 8 floats).
struct streamed_layout {
  int32_t chunks;     // 16-byte chunks per row
  int32_t rows;       // output rows: out, or inter for the gated kernel
  int32_t stage_rows; // rows of a stage (of each half)
  int32_t stages;
  int32_t halves; // 2 for the gated kernel (a gate row and its up row), else 1

  __host__ __device__ int64_t stage_bytes() const {
    return int64_t{stage_rows} * halves * chunks * 16;
  }
  __host__ __device__ int64_t ring_bytes() const { return stage_bytes() * stages; }
  __host__ __device__ int32_t sums_per_slot(int n) const {
    return stage_rows * halves * n * streamed_consumer_warps;
  }
  __host__ __device__ int64_t smem_bytes(int n) const {
    return ring_bytes() + int64_t{3} * stages * 8 + int64_t{stages} * sums_per_slot(n) * 4;
  }
};

// The first row of CTA b: the grid shares the rows evenly, each CTA a contiguous range.
__device__ __forceinline__ int32_t streamed_row_begin(const streamed_layout& l, int64_t b) {
  return static_cast<int32_t>(int64_t{l.rows} * b / gridDim.x);
}

struct streamed_smem {
  unsigned char* ring;
  uint64_t* full;
  uint64_t* summed;
  uint64_t* empty;
  float* sums;
};

__device__ __forceinline__ streamed_smem streamed_carve(unsigned char* smem,
                                                        const streamed_layout& l) {
  streamed_smem s;
  s.ring = smem;
  s.full = reinterpret_cast<uint64_t*>(smem + l.ring_bytes());
  s.summed = s.full + l.stages;
  s.empty = s.summed + l.stages;
  s.sums = reinterpret_cast<float*>(s.empty + l.stages);
  return s;
}

// The producer: stage u of the CTA's rows into slot u % stages, once the slot's previous stage is
// consumed. Gated: the gate rows, then the same rows of the up half.
__device__ __forceinline__ void streamed_produce(const unsigned char* w, const streamed_layout& l,
                                                 const streamed_smem& s, int32_t begin,
                                                 int32_t end) {
  const int64_t row_bytes = int64_t{l.chunks} * 16;
  int32_t u = 0;
  for (int32_t r = begin; r < end; r += l.stage_rows, ++u) {
    const int32_t slot = u % l.stages;
    if (u >= l.stages) mbarrier_wait(&s.empty[slot], (u / l.stages - 1) & 1);
    const int32_t n = min(l.stage_rows, end - r);
    const auto bytes = static_cast<uint32_t>(n * row_bytes);
    unsigned char* dst = s.ring + slot * l.stage_bytes();
    mbarrier_arrive_expect_tx(&s.full[slot], bytes * l.halves);
    bulk_load(dst, w + r * row_bytes, bytes, &s.full[slot]);
    if (l.halves == 2)
      bulk_load(dst + bytes, w + (int64_t{l.rows} + r) * row_bytes, bytes, &s.full[slot]);
  }
}

// A consumer warp's sums over its column slice of the stage's `rows` rows, for N tokens, into
// sums[(row * N + t) * 8 + warp] (lane 0 writes).
template <int N>
__device__ __forceinline__ void streamed_slice_sums(const uint4* stage, const uint4* x,
                                                    int32_t chunks, int32_t rows, float* sums) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  for (int32_t j = 0; j < rows; ++j) {
    float acc[N];
#pragma unroll
    for (int t = 0; t < N; ++t)
      acc[t] = 0.0f;
    for (int32_t c = warp * 32 + lane; c < chunks; c += streamed_consumers) {
      const uint4 wv = stage[int64_t{j} * chunks + c];
#pragma unroll
      for (int t = 0; t < N; ++t)
        acc[t] += dot8(wv, __ldg(x + int64_t{t} * chunks + c));
    }
#pragma unroll
    for (int t = 0; t < N; ++t) {
      acc[t] = warp_sum(acc[t]);
      if (lane == 0) sums[(j * N + t) * streamed_consumer_warps + warp] = acc[t];
    }
  }
}

__device__ __forceinline__ float streamed_row_sum(const float* sums, int32_t index) {
  float s = 0.0f;
#pragma unroll
  for (int w = 0; w < streamed_consumer_warps; ++w)
    s += sums[index * streamed_consumer_warps + w];
  return s;
}

// The adding warp of a stage: rows [r, r + n) of the output from the eight warps' sums.
template <int N, bool Gated>
__device__ __forceinline__ void streamed_write_rows(const float* sums, int32_t r, int32_t n,
                                                    const streamed_layout& l, float* y,
                                                    __nv_bfloat16* out, bool gelu_tanh) {
  for (int32_t e = static_cast<int32_t>(threadIdx.x) % 32; e < n * N; e += 32) {
    const int32_t j = e / N, t = e % N;
    const float v = streamed_row_sum(sums, j * N + t);
    if constexpr (Gated)
      out[int64_t{t} * l.rows + r + j] =
          __float2bfloat16_rn(gated(v, streamed_row_sum(sums, (n + j) * N + t), gelu_tanh));
    else
      y[int64_t{t} * l.rows + r + j] = v;
  }
}

template <int N, bool Gated>
__device__ __forceinline__ void streamed_consume(const uint4* x, float* y, __nv_bfloat16* out,
                                                 const streamed_layout& l, const streamed_smem& s,
                                                 int32_t begin, int32_t end, bool gelu_tanh) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  int32_t u = 0;
  for (int32_t r = begin; r < end; r += l.stage_rows, ++u) {
    const int32_t slot = u % l.stages;
    const uint32_t parity = (u / l.stages) & 1;
    const int32_t n = min(l.stage_rows, end - r);
    float* sums = s.sums + slot * l.sums_per_slot(N);
    mbarrier_wait(&s.full[slot], parity);
    streamed_slice_sums<N>(reinterpret_cast<const uint4*>(s.ring + slot * l.stage_bytes()), x,
                           l.chunks, n * l.halves, sums);
    __syncwarp(); // every lane's loads are in (the sums needed them) and lane 0's sums written
    if (lane == 0) {
      mbarrier_arrive(&s.empty[slot]);
      mbarrier_arrive(&s.summed[slot]);
    }
    if (u % streamed_consumer_warps != warp) continue;
    mbarrier_wait(&s.summed[slot], parity);
    streamed_write_rows<N, Gated>(sums, r, n, l, y, out, gelu_tanh);
    __syncwarp();
    if (lane == 0) mbarrier_arrive(&s.empty[slot]); // the sums are read too
  }
}

// y[t, o] (or the gated kernel's out[t, i]) for N tokens; see above.
template <int N, bool Gated>
__global__ void __launch_bounds__(streamed_threads, 1)
    streamed_skinny_kernel(const unsigned char* w, const uint4* x, float* y, __nv_bfloat16* out,
                           const streamed_layout l, bool gelu_tanh) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char smem[];
  const streamed_smem s = streamed_carve(smem, l);
  const int32_t begin = streamed_row_begin(l, blockIdx.x);
  const int32_t end = streamed_row_begin(l, int64_t{blockIdx.x} + 1);
  if (threadIdx.x == 0) {
    for (int32_t i = 0; i < l.stages; ++i) {
      mbarrier_init(&s.full[i], 1);
      mbarrier_init(&s.summed[i], streamed_consumer_warps);
      mbarrier_init(&s.empty[i], streamed_consumer_warps + 1);
    }
    mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x >= streamed_consumers) {
    if (threadIdx.x == streamed_consumers) streamed_produce(w, l, s, begin, end);
    return;
  }
  pdl_wait_for_predecessor(); // x is its output; it may still read what y overwrites
  pdl_launch_dependents();
  streamed_consume<N, Gated>(x, y, out, l, s, begin, end, gelu_tanh);
#else
  __trap(); // the host launches it only where the device runs sm_90 code
#endif
}

// A device's answers for the streamed kernel, asked once per device and thread.
struct streamed_device {
  bool runs = false; // a 9.x+ device and a build with its code
  int max_smem = 0;  // opt-in shared memory per CTA
  int multiprocessors = 0;
};

streamed_device streamed_on_this_device() {
  thread_local std::map<int, streamed_device> known;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  auto [it, fresh] = known.emplace(device, streamed_device{});
  if (!fresh) return it->second;
  int major = 0;
  cudaFuncAttributes attr{};
  streamed_device& d = it->second;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess
      && cudaDeviceGetAttribute(&d.max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device)
             == cudaSuccess
      && cudaFuncGetAttributes(&attr, streamed_skinny_kernel<1, false>) == cudaSuccess)
    d.runs = major >= 9 && attr.binaryVersion >= 90;
  d.multiprocessors = multiprocessors();
  (void)cudaGetLastError();
  return d;
}

// The stage and ring sizes for rows of `chunks` chunks: as many rows per stage as fit
// streamed_stage_bytes (at least one), as many stages as fit streamed_ring_bytes (at least two,
// and fewer where the device's shared memory ends). Nothing when two stages do not fit.
std::optional<streamed_layout> plan_streamed(int32_t chunks, int32_t rows, int32_t halves, int n,
                                             int max_smem) {
  const int64_t row_bytes = int64_t{chunks} * 16 * halves;
  streamed_layout l{chunks, rows, 1, 2, halves};
  l.stage_rows = static_cast<int32_t>(
      std::clamp<int64_t>(streamed_stage_bytes / row_bytes, 1, streamed_max_stage_rows));
  l.stages = static_cast<int32_t>(
      std::clamp<int64_t>(streamed_ring_bytes / l.stage_bytes(), 2, streamed_max_stages));
  while (l.stages > 2 && l.smem_bytes(n) > max_smem)
    --l.stages;
  if (l.smem_bytes(n) > max_smem) return std::nullopt;
  return l;
}

// Why the streamed kernel cannot run this projection here, or "" when it can.
std::string streamed_refusal(const streamed_device& d, const std::optional<streamed_layout>& l,
                             int32_t in) {
  if (!d.runs) return "the device or the build has no sm_90 code for it";
  if (!l) return "two stages of rows of " + std::to_string(in) + " elements exceed shared memory";
  return {};
}

// Raises a kernel's dynamic shared memory limit to the device's opt-in maximum, once per kernel,
// device and thread (a launch may then be captured into a graph with no attribute call in it).
cudaError_t allow_max_smem(const void* kernel, int max_smem) {
  thread_local std::set<std::pair<const void*, int>> raised;
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (raised.count({kernel, device}) > 0) return cudaSuccess;
  const cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem);
  if (e == cudaSuccess) raised.emplace(kernel, device);
  return e;
}

template <int N, bool Gated>
cuda_status launch_streamed(const void* w, const void* x, float* y, void* out,
                            const streamed_layout& l, int sms, int max_smem, bool gelu_tanh,
                            cudaStream_t stream) {
  auto* kernel = streamed_skinny_kernel<N, Gated>;
  const auto smem = static_cast<size_t>(l.smem_bytes(N));
  KVACTOR_CUDA_CALL(allow_max_smem(reinterpret_cast<const void*>(kernel), max_smem));
  const auto ctas = static_cast<unsigned>(std::min<int64_t>(sms, l.rows));
  KVACTOR_CUDA_CALL(launch_ex(kernel, dim3(ctas), streamed_threads, smem, true, stream,
                              static_cast<const unsigned char*>(w), static_cast<const uint4*>(x), y,
                              static_cast<__nv_bfloat16*>(out), l, gelu_tanh));
  return {};
}

// f(std::integral_constant<int, N>{}) for num_tokens N in [1, skinny_max_tokens].
template <class F>
cuda_status dispatch_tokens(int32_t num_tokens, F&& f) {
  switch (num_tokens) {
  case 1: return f(std::integral_constant<int, 1>{});
  case 2: return f(std::integral_constant<int, 2>{});
  case 3: return f(std::integral_constant<int, 3>{});
  default: return f(std::integral_constant<int, 4>{});
  }
}

// Whether `automatic` takes the streamed kernel where it can run. Off until its tests and
// figures on an H200 are in (bench/skinny_device_run.sh).
constexpr bool streamed_by_default = false;

// The one entry of both public launchers: checks, the kernel choice, the launch.
cuda_status launch_projection(const char* what, const void* w, const void* x, float* y, void* out,
                              int32_t num_tokens, int32_t in, int32_t rows, bool gated,
                              bool gelu_tanh, skinny_kernel kernel, cudaStream_t stream) {
  KVACTOR_CUDA_CHECK_ARG(num_tokens >= 1 && num_tokens <= skinny_max_tokens && in % 8 == 0 && in > 0
                             && rows > 0,
                         what, ": num_tokens ", num_tokens, " outside [1, ", skinny_max_tokens,
                         "], in ", in, " not a positive multiple of 8, or ", rows, " rows");
  const streamed_device d =
      kernel == skinny_kernel::warp_per_row ? streamed_device{} : streamed_on_this_device();
  const auto l = plan_streamed(in / 8, rows, gated ? 2 : 1, num_tokens, d.max_smem);
  const std::string refusal = streamed_refusal(d, l, in);
  KVACTOR_CUDA_CHECK_ARG(kernel != skinny_kernel::streamed || refusal.empty(), what,
                         ": the streamed kernel cannot run: ", refusal);
  const bool streamed = refusal.empty()
                        && (kernel == skinny_kernel::streamed
                            || (kernel == skinny_kernel::automatic && streamed_by_default));
  return dispatch_tokens(num_tokens, [&](auto tokens) {
    constexpr int N = decltype(tokens)::value;
    if (streamed)
      return gated ? launch_streamed<N, true>(w, x, y, out, *l, d.multiprocessors, d.max_smem,
                                              gelu_tanh, stream)
                   : launch_streamed<N, false>(w, x, y, out, *l, d.multiprocessors, d.max_smem,
                                               gelu_tanh, stream);
    return gated ? launch_warp_per_row_gated<N>(w, x, out, in, rows, gelu_tanh, stream)
                 : launch_warp_per_row<N>(w, x, y, in, rows, stream);
  });
}

} // namespace

cuda_status launch_skinny_gemm(const void* w, const void* x, float* y, int32_t num_tokens,
                               int32_t in, int32_t out, cudaStream_t stream, skinny_kernel kernel) {
  return launch_projection("skinny_gemm", w, x, y, nullptr, num_tokens, in, out, false, false,
                           kernel, stream);
}

cuda_status launch_skinny_gated_mlp(const void* gate_up, const void* x, void* out,
                                    int32_t num_tokens, int32_t in, int32_t inter, bool gelu_tanh,
                                    cudaStream_t stream, skinny_kernel kernel) {
  return launch_projection("skinny_gated_mlp", gate_up, x, nullptr, out, num_tokens, in, inter,
                           true, gelu_tanh, kernel, stream);
}

} // namespace kvactor::kernels::cuda_detail
