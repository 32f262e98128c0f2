// rms_norm, linear and RoPE against their definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "attention_oracle.hpp"
#include "expect_invalid.hpp"
#include "kvactor/kernels/dense_ops.h"

namespace kvactor::kernels::test {
namespace {

TEST(DenseOps, RmsNormGivesUnitMeanSquareAndKeepsZeroRows) {
  std::vector<float> x{3, -4, 0, 0, 0, 0, 0, 0};
  std::vector<float> y(x.size());
  rms_norm(x.data(), 2, 4, 1e-6f, y.data());
  EXPECT_NEAR(y[0], 3.0f / 2.5f, 1e-5f); // rms of (3, -4, 0, 0) is 2.5
  EXPECT_NEAR(y[1], -4.0f / 2.5f, 1e-5f);
  for (size_t i = 4; i < 8; ++i)
    EXPECT_EQ(y[i], 0.0f);
}

TEST(DenseOps, LinearDotsEachOutputRow) {
  const std::vector<float> x{1, 2, 3, 4, 5, 6}; // [2, 3]
  const std::vector<float> w{1, 0, 0, 0, 1, 1}; // [2, 3]: y0 = x0, y1 = x1 + x2
  std::vector<float> y(4);
  linear(x.data(), w.data(), 2, 3, 2, y.data());
  EXPECT_EQ(y, (std::vector<float>{1, 5, 4, 11}));
}

TEST(DenseOps, RopeIsIdentityAtZeroAndRelativeInPosition) {
  std::mt19937 rng(5);
  const int32_t d = 16;
  const std::vector<float> q0 = random_floats(d, rng), k0 = random_floats(d, rng);
  auto rotated = [&](const std::vector<float>& x, int32_t pos, int32_t offset, int32_t dim) {
    std::vector<float> y = x;
    rope(y.data(), &pos, 1, 1, d, offset, dim, 10000.0f);
    return y;
  };
  EXPECT_EQ(rotated(q0, 0, 0, d), q0);
  auto dot = [](const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i)
      s += double{a[i]} * b[i];
    return s;
  };
  // q . k depends on the positions only through their difference.
  EXPECT_NEAR(dot(rotated(q0, 7, 0, d), rotated(k0, 3, 0, d)),
              dot(rotated(q0, 104, 0, d), rotated(k0, 100, 0, d)), 1e-4);
  // A partial rotation leaves the dims outside [offset, offset + dim) alone.
  const std::vector<float> tail = rotated(q0, 9, 8, 8);
  for (int32_t i = 0; i < 8; ++i)
    EXPECT_EQ(tail[static_cast<size_t>(i)], q0[static_cast<size_t>(i)]);
  // Pair (i, i + half) turns by angle pos * theta^(-2i/dim): i = 0 turns by pos radians.
  const std::vector<float> r = rotated(q0, 1, 0, d);
  EXPECT_NEAR(r[0], q0[0] * std::cos(1.0f) - q0[8] * std::sin(1.0f), 1e-6);
  EXPECT_NEAR(r[8], q0[8] * std::cos(1.0f) + q0[0] * std::sin(1.0f), 1e-6);
}

TEST(DenseOps, RopeRejectsAnOddOrOversizedRotation) {
  std::vector<float> x(8);
  const int32_t pos = 0;
  expect_invalid([&] { rope(x.data(), &pos, 1, 1, 8, 0, 3, 10000.0f); }, "rot_dim: 3");
  expect_invalid([&] { rope(x.data(), &pos, 1, 1, 8, 4, 6, 10000.0f); }, "rot_offset: 4");
}

} // namespace
} // namespace kvactor::kernels::test

namespace kvactor::kernels {
namespace {

// projection() (the decoder's GEMM) gives a token the same bits whatever the batch around it:
// alone, in a batch of 37, at any offset; and agrees with the reference loop to float rounding.
TEST(Projection, ATokensResultIsTheSameBitsInAnyBatch) {
  const int32_t n = 37, in = 1000, out = 300; // `in` past OpenBLAS's K blocking
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(static_cast<size_t>(n) * in), w(static_cast<size_t>(in) * out);
  for (auto& v : x)
    v = u(rng);
  for (auto& v : w)
    v = u(rng);
  std::vector<float> batched(static_cast<size_t>(n) * out), ref(batched.size());
  projection(x.data(), w.data(), n, in, out, batched.data());
  linear(x.data(), w.data(), n, in, out, ref.data());
  for (int32_t t = 0; t < n; ++t) {
    std::vector<float> alone(static_cast<size_t>(out));
    projection(x.data() + static_cast<size_t>(t) * in, w.data(), 1, in, out, alone.data());
    ASSERT_TRUE(std::equal(alone.begin(), alone.end(), batched.begin() + t * out))
        << "token " << t << " (" << projection_backend() << ")";
    for (int32_t o = 0; o < out; ++o)
      EXPECT_NEAR(batched[static_cast<size_t>(t * out + o)], ref[static_cast<size_t>(t * out + o)],
                  1e-3f);
  }
}

} // namespace
} // namespace kvactor::kernels
