// FP8 E4M3 as vLLM's FP8 KV cache stores it: every code's value, round to nearest even,
// saturation at 448, and the per-tensor scale.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "kvactor/kernels/fp8.h"

namespace kvactor::kernels {
namespace {

TEST(Fp8E4m3, KnownCodesHaveTheirValues) {
  EXPECT_EQ(fp8_e4m3_to_float(0x00), 0.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x01), std::ldexp(1.0f, -9)); // the smallest subnormal
  EXPECT_EQ(fp8_e4m3_to_float(0x07), 7.0f * std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_e4m3_to_float(0x08), std::ldexp(1.0f, -6)); // the smallest normal
  EXPECT_EQ(fp8_e4m3_to_float(0x38), 1.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x3C), 1.5f);
  EXPECT_EQ(fp8_e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0xB8), -1.0f);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0xFF)));
}

TEST(Fp8E4m3, EveryFiniteCodeEncodesBackToItself) {
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<uint8_t>(c);
    if ((code & 0x7F) == 0x7F) continue; // NaN
    EXPECT_EQ(float_to_fp8_e4m3(fp8_e4m3_to_float(code)), code) << "code " << c;
  }
}

TEST(Fp8E4m3, ValuesIncreaseWithTheCode) {
  for (int c = 1; c < 0x7F; ++c)
    EXPECT_LT(fp8_e4m3_to_float(static_cast<uint8_t>(c - 1)),
              fp8_e4m3_to_float(static_cast<uint8_t>(c)))
        << "code " << c;
}

TEST(Fp8E4m3, RoundsToTheNearestCodeAndTiesToTheEvenOne) {
  EXPECT_EQ(float_to_fp8_e4m3(1.0625f), 0x38); // halfway 1 (0x38) .. 1.125 (0x39): even
  EXPECT_EQ(float_to_fp8_e4m3(1.1875f), 0x3A); // halfway 1.125 (0x39) .. 1.25 (0x3A): even
  EXPECT_EQ(float_to_fp8_e4m3(1.07f), 0x39);   // past halfway
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(1.0f, -10)), 0x00); // halfway 0 .. smallest: 0
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(1.5f, -10)), 0x01);
  // Across an exponent step: halfway 7 x 2^-9 (0x07) .. 2^-6 (0x08) goes to 0x08.
  EXPECT_EQ(float_to_fp8_e4m3(7.5f * std::ldexp(1.0f, -9)), 0x08);
  EXPECT_EQ(float_to_fp8_e4m3(-1.0625f), 0xB8);
}

// The oracle: the nearest of all 254 finite codes by exhaustive search, ties to the even code.
uint8_t nearest_code_by_search(float x) {
  int best = -1;
  double best_distance = 0.0;
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    if (std::signbit(x) != ((c & 0x80) != 0)) continue;
    const double d = std::fabs(static_cast<double>(fp8_e4m3_to_float(static_cast<uint8_t>(c)))
                               - static_cast<double>(x));
    if (best < 0 || d < best_distance || (d == best_distance && (c & 1) == 0)) {
      best = c;
      best_distance = d;
    }
  }
  return static_cast<uint8_t>(best);
}

TEST(Fp8E4m3, EncodesAMillionValuesAsTheExhaustiveNearestCodeSearch) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-12.0f, 9.0f), sign(-1.0f, 1.0f);
  for (int i = 0; i < 1000000; ++i) {
    const float x = std::copysign(std::exp2(exponent(rng)), sign(rng));
    if (std::fabs(x) >= 448.0f) continue;
    ASSERT_EQ(float_to_fp8_e4m3(x), nearest_code_by_search(x)) << "x = " << x;
  }
  // Every midpoint between neighbouring codes: the ties.
  for (int c = 1; c < 0x7F; ++c) {
    const float lo = fp8_e4m3_to_float(static_cast<uint8_t>(c - 1));
    const float hi = fp8_e4m3_to_float(static_cast<uint8_t>(c));
    const float mid = lo + (hi - lo) / 2;
    EXPECT_EQ(float_to_fp8_e4m3(mid), (c % 2 == 0) ? c : c - 1) << "between codes " << c - 1;
  }
}

TEST(Fp8E4m3, SaturatesAt448AndKeepsNanAndTheSignOfZero) {
  EXPECT_EQ(float_to_fp8_e4m3(448.0f), 0x7E);
  EXPECT_EQ(float_to_fp8_e4m3(1e6f), 0x7E);
  EXPECT_EQ(float_to_fp8_e4m3(INFINITY), 0x7E);
  EXPECT_EQ(float_to_fp8_e4m3(-1e6f), 0xFE);
  EXPECT_EQ(float_to_fp8_e4m3(NAN), 0x7F);
  EXPECT_EQ(float_to_fp8_e4m3(-0.0f), 0x80);
}

TEST(Fp8E4m3, APerTensorScaleStretchesTheRange) {
  const float scale = 0.01f; // values up to 4.48
  EXPECT_EQ(fp8_quantize(4.48f, scale), 0x7E);
  EXPECT_NEAR(fp8_dequantize(fp8_quantize(1.0f, scale), scale), 1.0f, 1.0f / 16);
  for (float x = -4.0f; x <= 4.0f; x += 0.37f) {
    const float back = fp8_dequantize(fp8_quantize(x, scale), scale);
    EXPECT_LE(std::fabs(back - x), std::fabs(x) / 16 + scale * std::ldexp(1.0f, -10)) << x;
  }
}

} // namespace
} // namespace kvactor::kernels
