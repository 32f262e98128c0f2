// The dense kernels between the decoder's GEMMs (decoder_ops.h), each against a host reference:
// the residual add and RMS norm on each of its kernels (the strided one, and the float4 one at
// 1, 2, 4 and 8 vectors per thread), the q/k/v preparation (bias, per-head norm, RoPE over all
// or part of a head, the KV store in bf16 and in FP8 codes), the greedy argmax (ties, NaNs), the
// embedding gather, the gated activation and the soft-cap. The decoders' tests check them whole
// against transformers; these small launches name the kernel that goes wrong, and they are what
// compute-sanitizer's racecheck can afford over every kernel here with shared memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../../kernels/cuda/cublas_gemm.h"
#include "../../kernels/cuda/decoder_ops.h"
#include "gpu_support.hpp"
#include "kvactor/kernels/fp8.h"

namespace kvactor::kernels::gpu_test {
namespace {

using cuda_detail::kv_store;
using cuda_detail::qkv_prepare_args;
using cuda_detail::residual_norm_args;

std::vector<float> random_floats(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v)
    x = dist(rng);
  return v;
}

void sync_or_fail() {
  cuda_or_throw(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

// Whether bf16 bits `got` are within a bf16 step (2^-7 relative) of `want`, plus `slack`.
bool near_bf16(uint16_t got, double want, double slack = 1e-6) {
  return std::fabs(double{bf16_to_float(got)} - want) <= std::fabs(want) / 128.0 + slack;
}

// ---- residual add + RMS norm ----

// One launch of launch_residual_norm: which inputs it has, over how many rows of what width.
struct norm_case {
  int32_t rows, dim;
  bool add, add_weight, row_indices, out, one_plus;
  std::string name() const {
    return "rows " + std::to_string(rows) + " dim " + std::to_string(dim) + (add ? " +add" : "")
           + (add_weight ? " (normed)" : "") + (row_indices ? " rows[]" : "") + (out ? " out" : "")
           + (one_plus ? " 1+w" : "");
  }
};

// The references below are written here in double, not taken from the CPU decoder's dense_ops.h:
// its RMS norm sums in float and its RoPE takes the angle in double, where the kernels take it in
// float. Checked on the host over these cases: dense_ops.h's results differ from these by up to
// 1.6x the tolerance (Gemma's normed residual at 8192 and 16384, near-zero outputs) and 0.5x
// (RoPE at positions above 4096), so they would fail a kernel that is right.

// v / sqrt(mean(v^2) + eps), in double.
double inv_rms(const float* v, int32_t dim, float eps) {
  double s = 0.0;
  for (int32_t c = 0; c < dim; ++c)
    s += double{v[c]} * v[c];
  return 1.0 / std::sqrt(s / dim + eps);
}

double weight_at(const std::vector<float>& w, int32_t c, bool one_plus) {
  return one_plus ? 1.0 + w[static_cast<size_t>(c)] : w[static_cast<size_t>(c)];
}

// The host's x after the launch (float, as the kernel keeps it) and the bf16 output it wants.
struct norm_reference {
  std::vector<float> x;
  std::vector<double> out;
};

norm_reference norm_on_host(const norm_case& c, std::vector<float> x, const std::vector<float>& add,
                            const std::vector<float>& add_w, const std::vector<float>& w,
                            const std::vector<int32_t>& rows, float eps) {
  norm_reference ref{std::move(x), std::vector<double>(static_cast<size_t>(c.rows) * c.dim)};
  for (int32_t r = 0; r < c.rows; ++r) {
    float* const xr = ref.x.data() + int64_t{c.row_indices ? rows[r] : r} * c.dim;
    if (c.add) {
      const float* const ar = add.data() + int64_t{r} * c.dim;
      const double a_inv = c.add_weight ? inv_rms(ar, c.dim, eps) : 1.0;
      for (int32_t i = 0; i < c.dim; ++i)
        xr[i] += static_cast<float>(c.add_weight ? ar[i] * a_inv * weight_at(add_w, i, c.one_plus)
                                                 : double{ar[i]});
    }
    const double inv = inv_rms(xr, c.dim, eps);
    for (int32_t i = 0; i < c.dim; ++i)
      ref.out[static_cast<size_t>(r) * c.dim + i] = xr[i] * inv * weight_at(w, i, c.one_plus);
  }
  return ref;
}

// Runs one case on the device and compares x (float) and out (bf16) with the host.
void check_norm_case(const norm_case& c) {
  std::mt19937 rng(static_cast<uint32_t>(c.dim * 31 + c.rows));
  const int32_t x_rows = c.row_indices ? c.rows + 3 : c.rows; // rows[] picks some of them
  const float eps = 1e-6f;
  const auto x = random_floats(static_cast<size_t>(x_rows) * c.dim, rng, -2.0f, 2.0f);
  const auto add = random_floats(static_cast<size_t>(c.rows) * c.dim, rng);
  const auto add_w = random_floats(static_cast<size_t>(c.dim), rng, 0.5f, 1.5f);
  const auto w = random_floats(static_cast<size_t>(c.dim), rng, 0.5f, 1.5f);
  std::vector<int32_t> rows(static_cast<size_t>(c.rows));
  for (int32_t r = 0; r < c.rows; ++r)
    rows[static_cast<size_t>(r)] = (r * 3 + 2) % x_rows; // distinct, 3 being prime to 7
  device_array<float> x_d(x), add_d(add), add_w_d(add_w), w_d(w);
  device_array<int32_t> rows_d(rows);
  device_array<uint16_t> out_d(static_cast<size_t>(c.rows) * c.dim);
  out_d.fill_bytes(0xff);
  const residual_norm_args a{x_d.get(),
                             c.add ? add_d.get() : nullptr,
                             c.add_weight ? add_w_d.get() : nullptr,
                             w_d.get(),
                             c.row_indices ? rows_d.get() : nullptr,
                             c.out ? out_d.get() : nullptr,
                             c.rows,
                             c.dim,
                             eps,
                             c.one_plus};
  ASSERT_CUDA_OK(cuda_detail::launch_residual_norm(a, nullptr));
  sync_or_fail();
  const auto ref = norm_on_host(c, x, add, add_w, w, rows, eps);
  const auto x_got = x_d.download();
  for (size_t i = 0; i < x_got.size(); ++i)
    ASSERT_NEAR(x_got[i], ref.x[i], 1e-5 * (1.0 + std::fabs(ref.x[i])))
        << c.name() << ", x[" << i << "]";
  if (!c.out) return;
  const auto out = out_d.download();
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_TRUE(near_bf16(out[i], ref.out[i]))
        << c.name() << ", out[" << i << "] = " << bf16_to_float(out[i]) << ", want " << ref.out[i];
}

// Widths for each kernel: 896 (float4, 1 per thread), 4096 (2), 5120 and 8192 (4), 12288 and
// 16384 (8), 898 (not a multiple of 4) and 16388 (more than 8 per thread) on the strided kernel.
TEST(DecoderOpsCuda, ResidualAddAndRmsNormMatchTheHostOnEveryKernel) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  for (const int32_t dim : {896, 898, 4096, 5120, 8192, 12288, 16384, 16388}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    ASSERT_NO_FATAL_FAILURE(
        check_norm_case({3, dim, true, false, false, true, false})); // pre-attention: add, norm
    ASSERT_NO_FATAL_FAILURE(
        check_norm_case({2, dim, true, true, false, true, true})); // Gemma's post-norm then norm
    ASSERT_NO_FATAL_FAILURE(
        check_norm_case({4, dim, false, false, true, true, false})); // the rows the LM head reads
    ASSERT_NO_FATAL_FAILURE(
        check_norm_case({2, dim, true, false, false, false, false})); // the last residual add alone
  }
}

// ---- q/k/v preparation ----

struct qkv_case {
  int32_t tokens, q_heads, kv_heads, head_dim, rot_dim;
  bool bias, qk_norm, one_plus;
  element_type cache; // f32: no store; bf16 or fp8_e4m3: the fused KV write
  std::string name() const {
    return "heads " + std::to_string(q_heads) + "/" + std::to_string(kv_heads) + " dim "
           + std::to_string(head_dim) + " rot " + std::to_string(rot_dim) + (bias ? " bias" : "")
           + (qk_norm ? " qk-norm" : "") + (one_plus ? " 1+w" : "")
           + (cache == element_type::bf16       ? " bf16 cache"
              : cache == element_type::fp8_e4m3 ? " fp8 cache"
                                                : "");
  }
  int32_t heads() const { return q_heads + 2 * kv_heads; }
};

// The inputs of one case, on the host.
struct qkv_inputs {
  std::vector<float> qkv, bias, q_norm, k_norm, inv_freq;
  std::vector<int32_t> positions;
};

qkv_inputs make_qkv_inputs(const qkv_case& c, std::mt19937& rng) {
  qkv_inputs in;
  in.qkv = random_floats(static_cast<size_t>(c.tokens) * c.heads() * c.head_dim, rng, -2.0f, 2.0f);
  in.bias = random_floats(static_cast<size_t>(c.heads()) * c.head_dim, rng, -0.5f, 0.5f);
  in.q_norm = random_floats(static_cast<size_t>(c.head_dim), rng, 0.5f, 1.5f);
  in.k_norm = random_floats(static_cast<size_t>(c.head_dim), rng, 0.5f, 1.5f);
  for (int32_t i = 0; i < c.rot_dim / 2; ++i)
    in.inv_freq.push_back(static_cast<float>(std::pow(10000.0, -2.0 * i / c.rot_dim)));
  std::uniform_int_distribution<int32_t> pos(0, 8191);
  for (int32_t t = 0; t < c.tokens; ++t)
    in.positions.push_back(pos(rng));
  return in;
}

// Head h of token t after bias, norm and RoPE, in double (the rotation's angle in float, as the
// kernel computes it); `scale[e]` gets the magnitude of the terms, the rounding's scale.
std::vector<double> prepared_head(const qkv_case& c, const qkv_inputs& in, int32_t t, int32_t h,
                                  std::vector<double>& scale) {
  const int32_t d = c.head_dim, half = c.rot_dim / 2;
  const bool is_v = h >= c.q_heads + c.kv_heads;
  std::vector<double> v(static_cast<size_t>(d));
  for (int32_t e = 0; e < d; ++e)
    v[e] = in.qkv[(int64_t{t} * c.heads() + h) * d + e] + (c.bias ? in.bias[h * d + e] : 0.0f);
  scale.resize(v.size());
  for (size_t e = 0; e < v.size(); ++e)
    scale[e] = std::fabs(v[e]);
  if (is_v) return v;
  if (c.qk_norm) {
    const auto& w = h < c.q_heads ? in.q_norm : in.k_norm;
    double s = 0.0;
    for (const double x : v)
      s += x * x;
    const double inv = 1.0 / std::sqrt(s / d + 1e-6);
    for (int32_t e = 0; e < d; ++e)
      v[e] *= inv * weight_at(w, e, c.one_plus);
  }
  std::vector<double> y = v;
  for (int32_t e = 0; e < c.rot_dim; ++e) {
    const float angle = static_cast<float>(in.positions[t]) * in.inv_freq[e < half ? e : e - half];
    const double cs = std::cos(double{angle}), sn = std::sin(double{angle});
    const double other = e < half ? -v[e + half] : v[e - half];
    y[e] = v[e] * cs + other * sn;
    scale[e] = std::fabs(v[e] * cs) + std::fabs(other * sn);
  }
  return y;
}

// The paged cache the case stores into: K then V of a head in each (block, head, token) entry.
struct qkv_cache {
  static constexpr int32_t block_size = 16, blocks = 4;
  explicit qkv_cache(const qkv_case& c)
      : entry(2 * c.head_dim), bytes(c.cache == element_type::fp8_e4m3 ? 1 : 2),
        elements(int64_t{blocks} * c.kv_heads * block_size * entry) {}
  kv_store store(void* cache, const int64_t* slots, const qkv_case& c) const {
    return {cache,
            c.cache == element_type::fp8_e4m3,
            0.75f,
            1.25f,
            int64_t{c.kv_heads} * block_size * entry,
            int64_t{block_size} * entry,
            entry,
            int64_t{blocks} * block_size,
            block_size,
            slots};
  }
  int64_t at(int64_t slot, int32_t kvh, int32_t c_kv_heads) const {
    return slot / block_size * c_kv_heads * block_size * entry + int64_t{kvh} * block_size * entry
           + slot % block_size * entry;
  }
  int64_t entry, bytes, elements;
};

// The cache element `i` of head kvh at `slot`: the bf16 bits `bits` (K, or V after head_dim), or
// their FP8 code over the scale.
bool stored_matches(const std::vector<uint8_t>& cache, const qkv_case& c, const qkv_cache& layout,
                    int64_t at, bool is_v, uint16_t bits) {
  if (c.cache == element_type::fp8_e4m3)
    return cache[static_cast<size_t>(at)]
           == fp8_quantize(bf16_to_float(bits), is_v ? 1.25f : 0.75f);
  uint16_t got;
  std::memcpy(&got, cache.data() + at * layout.bytes, 2);
  return got == bits;
}

// q, k, v as the device wrote them, and the cache's bytes after the launch.
struct qkv_outputs {
  std::vector<uint16_t> q, k, v;
  std::vector<uint8_t> cache;
};

qkv_outputs run_qkv_prepare(const qkv_case& c, const qkv_inputs& in,
                            const std::vector<int64_t>& slots, cuda_status& st) {
  const qkv_cache layout(c);
  device_array<float> qkv(in.qkv), bias(in.bias), qn(in.q_norm), kn(in.k_norm),
      inv_freq(in.inv_freq);
  device_array<int32_t> pos(in.positions);
  device_array<int64_t> slot_d(slots);
  const auto per_token = [&](int32_t heads) {
    return static_cast<size_t>(c.tokens) * heads * c.head_dim;
  };
  device_array<uint16_t> q(per_token(c.q_heads)), k(per_token(c.kv_heads)),
      v(per_token(c.kv_heads));
  device_array<uint8_t> cache(static_cast<size_t>(layout.elements * layout.bytes));
  for (auto* a : {&q, &k, &v})
    a->fill_bytes(0xff);
  cache.fill_bytes(0x7f); // NaN in FP8, and a value no bf16 output here has (0x7f7f)
  qkv_prepare_args a{qkv.get(),
                     c.bias ? bias.get() : nullptr,
                     c.qk_norm ? qn.get() : nullptr,
                     c.qk_norm ? kn.get() : nullptr,
                     inv_freq.get(),
                     pos.get(),
                     q.get(),
                     k.get(),
                     v.get(),
                     c.tokens,
                     c.q_heads,
                     c.kv_heads,
                     c.head_dim,
                     c.rot_dim,
                     1e-6f,
                     c.one_plus,
                     {}};
  if (c.cache != element_type::f32) a.store = layout.store(cache.get(), slot_d.get(), c);
  st = cuda_detail::launch_qkv_prepare(a, nullptr);
  if (st.ok()) sync_or_fail();
  return {q.download(), k.download(), v.download(), cache.download()};
}

// Every output element against the host, and every cache entry: written where the token's slot
// is in the cache, untouched elsewhere.
void check_qkv_case(const qkv_case& c) {
  std::mt19937 rng(static_cast<uint32_t>(c.head_dim * 131 + c.q_heads * 7 + c.rot_dim));
  const auto in = make_qkv_inputs(c, rng);
  const qkv_cache layout(c);
  std::vector<int64_t> slots(static_cast<size_t>(c.tokens));
  for (int32_t t = 0; t < c.tokens; ++t)
    slots[t] = (t * 5 + 3) % (layout.blocks * layout.block_size);
  slots[0] = -1; // padding: not stored
  if (c.tokens > 1) slots[1] = int64_t{layout.blocks} * qkv_cache::block_size; // past the cache
  cuda_status st;
  const auto out = run_qkv_prepare(c, in, slots, st);
  ASSERT_CUDA_OK(st);
  std::vector<bool> written(static_cast<size_t>(layout.elements));
  std::vector<double> scale;
  for (int32_t t = 0; t < c.tokens; ++t)
    for (int32_t h = 0; h < c.heads(); ++h) {
      const auto want = prepared_head(c, in, t, h, scale);
      const bool is_q = h < c.q_heads, is_v = h >= c.q_heads + c.kv_heads;
      const int32_t kvh = is_q ? 0 : is_v ? h - c.q_heads - c.kv_heads : h - c.q_heads;
      const auto& got = is_q ? out.q : is_v ? out.v : out.k;
      const int64_t base =
          (int64_t{t} * (is_q ? c.q_heads : c.kv_heads) + (is_q ? h : kvh)) * c.head_dim;
      const bool stored = !is_q && c.cache != element_type::f32 && slots[t] >= 0
                          && slots[t] < int64_t{layout.blocks} * qkv_cache::block_size;
      for (int32_t e = 0; e < c.head_dim; ++e) {
        const uint16_t bits = got[static_cast<size_t>(base + e)];
        ASSERT_TRUE(near_bf16(bits, want[e], scale[e] / 256.0 + 1e-6))
            << c.name() << ": token " << t << " head " << h << " element " << e << " = "
            << bf16_to_float(bits) << ", want " << want[e];
        if (!stored) continue;
        const int64_t at = layout.at(slots[t], kvh, c.kv_heads) + (is_v ? c.head_dim : 0) + e;
        written[static_cast<size_t>(at)] = true;
        ASSERT_TRUE(stored_matches(out.cache, c, layout, at, is_v, bits))
            << c.name() << ": the cache at token " << t << " head " << h << " element " << e;
      }
    }
  for (int64_t i = 0; i < layout.elements; ++i) {
    if (written[static_cast<size_t>(i)]) continue;
    for (int64_t b = 0; b < layout.bytes; ++b)
      ASSERT_EQ(out.cache[static_cast<size_t>(i * layout.bytes + b)], 0x7f)
          << c.name() << ": cache element " << i << " written, but no token has its slot";
  }
}

// Head sizes 64, 128 and 256 (a lane's 2, 4 and 8 elements), RoPE over the whole head or a part
// (Phi-3's partial rotation), Qwen2's bias, Qwen3's and Gemma 3's q/k norms (Gemma's as 1 + w),
// the KV write fused in bf16 and in FP8 codes, more heads than one CTA's four warps.
TEST(DecoderOpsCuda, QkvPreparationMatchesTheHostAndStoresKvAtTheTokensSlots) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  using enum element_type;
  const std::vector<qkv_case> cases{{5, 8, 2, 128, 128, false, false, false, bf16},
                                    {3, 14, 2, 64, 64, true, false, false, f32},
                                    {4, 16, 8, 128, 128, false, true, false, fp8_e4m3},
                                    {2, 8, 4, 256, 256, false, true, true, bf16},
                                    {3, 32, 32, 96, 32, false, false, false, bf16},
                                    {6, 6, 3, 128, 64, true, true, false, fp8_e4m3},
                                    {1, 64, 8, 128, 128, false, false, false, bf16}};
  for (const auto& c : cases)
    ASSERT_NO_FATAL_FAILURE(check_qkv_case(c));
}

// ---- q/k/v preparation as the programmatic dependent of the projection ----

size_t differing(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i)
    n += a[i] != b[i];
  return n;
}

// The projection's output and the prepared q, k, v of one step of the chain below.
struct chain_buffers {
  chain_buffers(const qkv_case& c, int32_t in)
      : x(static_cast<size_t>(c.tokens) * in), w(static_cast<size_t>(c.heads()) * c.head_dim * in),
        qkv(static_cast<size_t>(c.tokens) * c.heads() * c.head_dim),
        q(static_cast<size_t>(c.tokens) * c.q_heads * c.head_dim),
        k(static_cast<size_t>(c.tokens) * c.kv_heads * c.head_dim), v(k.size()) {}
  device_array<uint16_t> x, w;
  device_array<float> qkv;
  device_array<uint16_t> q, k, v;
};

// A non-blocking stream and a cuBLAS handle on it, destroyed with the test however it ends.
struct stream_and_blas {
  stream_and_blas() {
    ok = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess
         && cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS
         && cublasSetStream(handle, stream) == CUBLAS_STATUS_SUCCESS;
  }
  stream_and_blas(const stream_and_blas&) = delete;
  stream_and_blas& operator=(const stream_and_blas&) = delete;
  ~stream_and_blas() {
    if (handle != nullptr) cublasDestroy(handle);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
  cudaStream_t stream = nullptr;
  cublasHandle_t handle = nullptr;
  bool ok = false;
};

// In a decoder step qkv_prepare starts before cuBLAS's projection ends (a programmatic dependent
// launch) and waits for it in the kernel: run back to back on one stream, with the projection's
// output poisoned before each GEMM, it must give the bits it gives when the host waits between
// the two. Also the smallest case of a dependent after a kernel that compute-sanitizer's kernel
// filter leaves uninstrumented (see bench/RESULTS.md).
TEST(DecoderOpsCuda, QkvPreparationAfterTheProjectionReadsItsFinishedOutput) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  const qkv_case c{8, 32, 8, 128, 128, false, true, false, element_type::f32};
  const int32_t in = 4096;
  std::mt19937 rng(17);
  const auto inputs = make_qkv_inputs(c, rng);
  chain_buffers b(c, in);
  cuda_or_throw(cudaMemcpy(b.x.get(), random_bits(element_type::bf16, b.x.size(), rng).data(),
                           b.x.size() * 2, cudaMemcpyHostToDevice),
                "x");
  cuda_or_throw(cudaMemcpy(b.w.get(), random_bits(element_type::bf16, b.w.size(), rng).data(),
                           b.w.size() * 2, cudaMemcpyHostToDevice),
                "w");
  device_array<float> qn(inputs.q_norm), kn(inputs.k_norm), inv_freq(inputs.inv_freq);
  device_array<int32_t> pos(inputs.positions);
  const stream_and_blas sb;
  ASSERT_TRUE(sb.ok) << "cannot create a stream and a cuBLAS handle";
  const cudaStream_t stream = sb.stream;
  const qkv_prepare_args a{b.qkv.get(), nullptr,    qn.get(),   kn.get(),  inv_freq.get(),
                           pos.get(),   b.q.get(),  b.k.get(),  b.v.get(), c.tokens,
                           c.q_heads,   c.kv_heads, c.head_dim, c.rot_dim, 1e-6f,
                           false,       {}};
  const int32_t out = c.heads() * c.head_dim;
  // One step: poison (the projection's output and q, k, v), project, prepare, all on the stream;
  // with `wait`, the host waits between the last two.
  const auto step = [&](bool wait) {
    cuda_or_throw(cudaMemsetAsync(b.qkv.get(), 0xff, b.qkv.size() * sizeof(float), stream),
                  "poison");
    for (auto* t : {&b.q, &b.k, &b.v})
      cuda_or_throw(cudaMemsetAsync(t->get(), 0xff, t->size() * sizeof(uint16_t), stream),
                    "poison");
    ASSERT_CUDA_OK(cuda_detail::gemm(sb.handle, element_type::bf16, b.w.get(), b.x.get(),
                                     b.qkv.get(), c.tokens, in, out));
    if (wait) cuda_or_throw(cudaStreamSynchronize(stream), "sync");
    ASSERT_CUDA_OK(cuda_detail::launch_qkv_prepare(a, stream));
    cuda_or_throw(cudaStreamSynchronize(stream), "sync");
  };
  step(true);
  ASSERT_FALSE(HasFatalFailure());
  const auto q0 = b.q.download(), k0 = b.k.download(), v0 = b.v.download();
  for (const auto* t : {&q0, &k0, &v0})
    ASSERT_EQ(std::count(t->begin(), t->end(), uint16_t{0xffff}), 0) << "an output not written";
  for (int i = 0; i < 20; ++i) {
    step(false);
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_EQ(differing(b.q.download(), q0), 0u) << "elements of q, back-to-back step " << i;
    EXPECT_EQ(differing(b.k.download(), k0), 0u) << "elements of k, back-to-back step " << i;
    EXPECT_EQ(differing(b.v.download(), v0), 0u) << "elements of v, back-to-back step " << i;
  }
}

// ---- argmax, embedding, gated activation, soft-cap ----

// The first index of the largest value, NaNs skipped; 0 when every value is NaN.
int32_t first_argmax(const float* row, int32_t vocab) {
  int32_t best = -1;
  for (int32_t c = 0; c < vocab; ++c)
    if (!std::isnan(row[c]) && (best < 0 || row[c] > row[best])) best = c;
  return best < 0 ? 0 : best;
}

TEST(DecoderOpsCuda, ArgmaxTakesTheLowestIndexOfTheLargestLogitAndSkipsNans) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(5);
  for (const int32_t vocab : {1, 7, 256, 257, 32000, 151936}) {
    const int32_t rows = 5;
    auto logits = random_floats(static_cast<size_t>(rows) * vocab, rng, -10.0f, 10.0f);
    float* const tie = logits.data() + vocab; // row 1: the same maximum twice
    tie[vocab / 3] = tie[vocab - 1] = 20.0f;
    float* const nans = logits.data() + 2 * int64_t{vocab}; // row 2: every logit NaN
    std::fill(nans, nans + vocab, std::numeric_limits<float>::quiet_NaN());
    float* const some = logits.data() + 3 * int64_t{vocab}; // row 3: NaNs around a maximum
    for (int32_t c = 0; c < vocab; c += 2)
      some[c] = std::numeric_limits<float>::quiet_NaN();
    std::fill(logits.end() - vocab, logits.end(), -INFINITY); // row 4: every logit -inf
    device_array<float> d(logits);
    device_array<int32_t> tokens(static_cast<size_t>(rows));
    tokens.fill_bytes(0xff);
    ASSERT_CUDA_OK(cuda_detail::launch_argmax(d.get(), rows, vocab, tokens.get(), nullptr));
    sync_or_fail();
    const auto got = tokens.download();
    for (int32_t r = 0; r < rows; ++r)
      EXPECT_EQ(got[r], first_argmax(logits.data() + int64_t{r} * vocab, vocab))
          << "vocab " << vocab << ", row " << r;
  }
}

TEST(DecoderOpsCuda, EmbeddingGathersScaledRowsAndZerosForUnknownIds) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(9);
  const int32_t vocab = 50, dim = 1000;
  const float scale = std::sqrt(float{dim});
  const auto embed = random_bits(element_type::bf16, static_cast<size_t>(vocab) * dim, rng);
  const std::vector<int32_t> ids{0, 49, -1, 50, 7, INT_MAX};
  device_array<uint16_t> embed_d(embed);
  device_array<int32_t> ids_d(ids);
  device_array<float> hidden(ids.size() * dim);
  hidden.fill_bytes(0xff);
  ASSERT_CUDA_OK(cuda_detail::launch_embed(embed_d.get(), vocab, ids_d.get(),
                                           static_cast<int32_t>(ids.size()), dim, scale,
                                           hidden.get(), nullptr));
  sync_or_fail();
  const auto got = hidden.download();
  for (size_t t = 0; t < ids.size(); ++t)
    for (int32_t c = 0; c < dim; ++c) {
      const bool known = ids[t] >= 0 && ids[t] < vocab;
      const float want = known ? bf16_to_float(embed[ids[t] * dim + c]) * scale : 0.0f;
      ASSERT_EQ(got[t * dim + c], want) << "id " << ids[t] << ", element " << c;
    }
}

TEST(DecoderOpsCuda, GatedActivationAndSoftcapMatchTheHost) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(13);
  const int32_t tokens = 3, inter = 1111;
  const auto gate_up = random_floats(static_cast<size_t>(tokens) * 2 * inter, rng, -6.0f, 6.0f);
  device_array<float> gate_up_d(gate_up);
  device_array<uint16_t> out(static_cast<size_t>(tokens) * inter);
  for (const bool gelu : {false, true}) {
    out.fill_bytes(0xff);
    ASSERT_CUDA_OK(cuda_detail::launch_gated_activation(gate_up_d.get(), tokens, inter, gelu,
                                                        out.get(), nullptr));
    sync_or_fail();
    const auto got = out.download();
    for (int32_t t = 0; t < tokens; ++t)
      for (int32_t i = 0; i < inter; ++i) {
        const double g = gate_up[static_cast<size_t>(t) * 2 * inter + i];
        const double u = gate_up[static_cast<size_t>(t) * 2 * inter + inter + i];
        const double act =
            gelu ? 0.5 * g * (1.0 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)))
                 : g / (1.0 + std::exp(-g));
        ASSERT_TRUE(near_bf16(got[static_cast<size_t>(t) * inter + i], act * u, 1e-5))
            << (gelu ? "GELU" : "SiLU") << " token " << t << " element " << i;
      }
  }
  device_array<float> logits(gate_up);
  ASSERT_CUDA_OK(cuda_detail::launch_softcap(logits.get(), static_cast<int64_t>(gate_up.size()),
                                             2.5f, nullptr));
  sync_or_fail();
  const auto capped = logits.download();
  for (size_t i = 0; i < capped.size(); ++i)
    ASSERT_NEAR(capped[i], 2.5 * std::tanh(gate_up[i] / 2.5), 2e-6) << "logit " << i;
}

} // namespace
} // namespace kvactor::kernels::gpu_test
