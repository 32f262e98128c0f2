// The projections kvactor computes itself (decoder_ops.h's skinny and plain kernels). The skinny
// kernel of single-token steps: against a host dot product in double at row lengths that take
// every path of a lane's loop (a row of 896 elements, Qwen2-0.5B's hidden size, once summed
// registers never loaded), every output written (outputs poisoned first), the gated form bit for
// bit the plain form followed by the activation, a row's bits independent of the other rows. The
// plain kernel of sanitizer runs (KVACTOR_GEMM=plain): against the same host dot product at any
// shape, bf16 and f16. The refusals and KVACTOR_GEMM's values need no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../../kernels/cuda/cublas_gemm.h"
#include "../../kernels/cuda/decoder_ops.h"
#include "gpu_support.hpp"

namespace kvactor::kernels::gpu_test {
namespace {

using cuda_detail::launch_gated_activation;
using cuda_detail::launch_plain_gemm;
using cuda_detail::launch_skinny_gated_mlp;
using cuda_detail::launch_skinny_gemm;

struct projection_case {
  int32_t tokens, in, out;
};

// Random weights [rows, in] and activations [tokens, in] of type bf16 (or f16), on the host and
// the device.
struct projection_inputs {
  projection_inputs(int32_t tokens, int32_t in, int32_t rows, uint32_t seed,
                    element_type type = element_type::bf16)
      : in(in), rows(rows), type(type) {
    std::mt19937 rng(seed);
    w_host = random_bits(type, static_cast<size_t>(rows) * in, rng);
    x_host = random_bits(type, static_cast<size_t>(tokens) * in, rng);
    w = std::make_unique<device_array<uint16_t>>(w_host);
    x = std::make_unique<device_array<uint16_t>>(x_host);
  }
  // sum_i w[row, i] x[t, i] in double, and the sum of the terms' magnitudes (the error scale).
  std::pair<double, double> dot(int32_t t, int32_t row) const {
    double s = 0.0, mag = 0.0;
    for (int32_t i = 0; i < in; ++i) {
      const double p = double{from_bits(type, w_host[static_cast<size_t>(row) * in + i])}
                       * from_bits(type, x_host[static_cast<size_t>(t) * in + i]);
      s += p;
      mag += std::fabs(p);
    }
    return {s, mag};
  }
  int32_t in, rows;
  element_type type;
  std::vector<uint16_t> w_host, x_host;
  std::unique_ptr<device_array<uint16_t>> w, x;
};

std::vector<float> run_gemm(const projection_inputs& d, int32_t tokens, cuda_status& status,
                            size_t w_offset_rows = 0, int32_t rows = -1) {
  if (rows < 0) rows = d.rows;
  device_array<float> y(static_cast<size_t>(tokens) * rows);
  y.fill_bytes(0xff); // NaN: a row the kernel skips shows
  status = launch_skinny_gemm(d.w->get() + w_offset_rows * d.in, d.x->get(), y.get(), tokens, d.in,
                              rows, nullptr);
  if (status.ok()) cuda_or_throw(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  return y.download();
}

// How many of y's outputs differ from the host's dot product by more than float rounding (NaN,
// a skipped output, included); the first five are reported.
int32_t wrong_outputs(const projection_inputs& d, const projection_case& c,
                      const std::vector<float>& y) {
  int32_t wrong = 0;
  for (int32_t t = 0; t < c.tokens; ++t)
    for (int32_t o = 0; o < c.out; ++o) {
      const auto [want, mag] = d.dot(t, o);
      const double got = y[static_cast<size_t>(t) * c.out + o];
      if (!(std::fabs(got - want) <= 1e-5 * mag + 1e-6) && wrong++ < 5)
        ADD_FAILURE() << to_string(d.type) << ", tokens " << c.tokens << " in " << c.in << " out "
                      << c.out << ": y[" << t << ", " << o << "] = " << got << ", want " << want;
    }
  return wrong;
}

// Rows shorter than a warp's chunks, of 97 to 127 chunks (1000 and 896 elements: a lane's first
// unrolled step runs for some lanes only), the 8B model's hidden size and MLP width, lengths that
// end inside an unrolled step, and row counts below and above the grid's warps.
TEST(SkinnyGemm, EveryOutputEqualsTheHostDotProduct) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  const std::vector<projection_case> cases{{1, 8, 3},      {2, 136, 37},   {3, 1000, 300},
                                           {1, 896, 64},   {4, 4096, 301}, {1, 14336, 133},
                                           {2, 3584, 1029}};
  for (const auto& c : cases) {
    const projection_inputs d(c.tokens, c.in, c.out, static_cast<uint32_t>(c.in + c.out));
    cuda_status st;
    const auto y = run_gemm(d, c.tokens, st);
    ASSERT_CUDA_OK(st);
    EXPECT_EQ(wrong_outputs(d, c, y), 0) << "in " << c.in << " out " << c.out;
  }
}

TEST(SkinnyGemm, GatedFormGivesTheProjectionThenTheActivationBitForBit) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  for (const bool gelu : {false, true})
    for (const int32_t tokens : {1, 4}) {
      const int32_t in = 4096, inter = 333;
      const projection_inputs d(tokens, in, 2 * inter, 7);
      cuda_status st;
      const auto gate_up = run_gemm(d, tokens, st);
      ASSERT_CUDA_OK(st);
      device_array<float> gate_up_dev(gate_up);
      device_array<uint16_t> want(static_cast<size_t>(tokens) * inter), got(want.size());
      want.fill_bytes(0xff);
      got.fill_bytes(0xff);
      ASSERT_CUDA_OK(
          launch_gated_activation(gate_up_dev.get(), tokens, inter, gelu, want.get(), nullptr));
      ASSERT_CUDA_OK(launch_skinny_gated_mlp(d.w->get(), d.x->get(), got.get(), tokens, in, inter,
                                             gelu, nullptr));
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const auto a = want.download(), b = got.download();
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(uint16_t)))
          << (gelu ? "GELU" : "SiLU") << ", " << tokens << " tokens";
    }
}

// The rows [100, 200) alone (another grid, other neighbours in every stage) give the bits they
// have among 1029 rows: a step's logits do not depend on how its projection was cut.
TEST(SkinnyGemm, ARowsBitsDoNotDependOnTheOtherRows) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  const int32_t tokens = 2, in = 4096;
  const projection_inputs d(tokens, in, 1029, 11);
  cuda_status st;
  const auto all = run_gemm(d, tokens, st);
  ASSERT_CUDA_OK(st);
  const auto part = run_gemm(d, tokens, st, 100, 100);
  ASSERT_CUDA_OK(st);
  for (int32_t t = 0; t < tokens; ++t)
    EXPECT_EQ(0, std::memcmp(&part[static_cast<size_t>(t) * 100],
                             &all[static_cast<size_t>(t) * 1029 + 100], 100 * sizeof(float)))
        << "token " << t;
}

// Any shape the decoder asks for: rows of 7 or 999 elements (no multiple of 8), a whole prompt of
// 300 tokens (more outputs than the grid's warps: the kernel strides), a lone token; outputs and
// 64 floats past them poisoned first, so a skipped output shows as NaN and a write past the end
// as a changed guard.
TEST(PlainGemm, EveryOutputEqualsTheHostDotProductAtAnyShape) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  const std::vector<projection_case> cases{
      {1, 8, 3}, {5, 7, 9}, {17, 999, 65}, {300, 128, 384}, {2, 4096, 301}};
  for (const element_type type : {element_type::bf16, element_type::f16})
    for (const auto& c : cases) {
      const projection_inputs d(c.tokens, c.in, c.out, static_cast<uint32_t>(c.tokens + c.out),
                                type);
      const size_t n = static_cast<size_t>(c.tokens) * c.out, guard = 64;
      device_array<float> y(n + guard);
      y.fill_bytes(0xff);
      ASSERT_CUDA_OK(launch_plain_gemm(type == element_type::bf16, d.w->get(), d.x->get(), y.get(),
                                       c.tokens, c.in, c.out, nullptr));
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      auto got = y.download();
      const std::vector<uint32_t> poison(guard, 0xffffffffu);
      EXPECT_EQ(0, std::memcmp(got.data() + n, poison.data(), guard * sizeof(float)))
          << "a write past the outputs: " << to_string(type) << " tokens " << c.tokens;
      got.resize(n);
      EXPECT_EQ(wrong_outputs(d, c, got), 0)
          << to_string(type) << " tokens " << c.tokens << " in " << c.in << " out " << c.out;
    }
}

// Checked on the host before any launch: these run without a GPU too.
void expect_refused(const cuda_status& s, const std::string& needle) {
  EXPECT_FALSE(s.ok()) << "accepted; expected a refusal naming " << needle;
  EXPECT_EQ(s.code(), cudaErrorInvalidValue);
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
}

alignas(16) unsigned char fake_memory[256];

TEST(SkinnyKernelChecks, TokenCountsOutsideOneToFourAreRefusedByName) {
  float* y = reinterpret_cast<float*>(fake_memory);
  expect_refused(launch_skinny_gemm(fake_memory, fake_memory, y, 0, 64, 4, nullptr),
                 "num_tokens 0");
  expect_refused(launch_skinny_gemm(fake_memory, fake_memory, y, 5, 64, 4, nullptr),
                 "num_tokens 5");
}

TEST(SkinnyKernelChecks, RowsThatAreNoMultipleOfEightElementsAreRefusedByName) {
  float* y = reinterpret_cast<float*>(fake_memory);
  expect_refused(launch_skinny_gemm(fake_memory, fake_memory, y, 1, 60, 4, nullptr), "in 60");
  expect_refused(launch_skinny_gated_mlp(fake_memory, fake_memory, y, 1, 12, 4, false, nullptr),
                 "in 12");
}

TEST(PlainKernelChecks, EmptyRowsOrNoOutputsAreRefusedByName) {
  float* y = reinterpret_cast<float*>(fake_memory);
  expect_refused(launch_plain_gemm(true, fake_memory, fake_memory, y, 1, 0, 4, nullptr), "in 0");
  expect_refused(launch_plain_gemm(true, fake_memory, fake_memory, y, 1, 8, 0, nullptr), "out 0");
  expect_refused(launch_plain_gemm(false, fake_memory, fake_memory, y, -1, 8, 4, nullptr),
                 "num_tokens -1");
}

TEST(ProjectionGemmChoice, KvactorGemmTakesCublasOrPlainAndNamesAnyOtherValue) {
  using cuda_detail::parse_projection_gemm;
  using cuda_detail::projection_gemm;
  const std::vector<std::pair<const char*, projection_gemm>> accepted{
      {nullptr, projection_gemm::cublas},
      {"", projection_gemm::cublas},
      {"cublas", projection_gemm::cublas},
      {"plain", projection_gemm::plain}};
  for (const auto& [value, want] : accepted) {
    auto got = projection_gemm::plain == want ? projection_gemm::cublas : projection_gemm::plain;
    EXPECT_TRUE(parse_projection_gemm(value, &got).ok()) << (value ? value : "(unset)");
    EXPECT_EQ(got, want) << (value ? value : "(unset)");
  }
  projection_gemm got{};
  expect_refused(parse_projection_gemm("Plain", &got), "KVACTOR_GEMM=\"Plain\"");
  expect_refused(parse_projection_gemm("cublas ", &got), "expected cublas (the default) or plain");
}

} // namespace
} // namespace kvactor::kernels::gpu_test
