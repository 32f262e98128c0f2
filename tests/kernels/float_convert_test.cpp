// bf16 / f16 conversions: exact round trips, round-to-nearest-even ties, specials.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "kvactor/kernels/float_convert.h"

namespace kvactor::kernels {
namespace {

TEST(FloatConvert, EveryBf16RoundTripsThroughFloat) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const float f = bf16_to_float(bits);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f))));
      continue;
    }
    ASSERT_EQ(float_to_bf16(f), bits) << b;
  }
}

TEST(FloatConvert, EveryF16RoundTripsThroughFloat) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const float f = f16_to_float(bits);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(f))));
      continue;
    }
    ASSERT_EQ(float_to_f16(f), bits) << b;
  }
}

TEST(FloatConvert, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81); // above half: up
  EXPECT_EQ(float_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80); // rounds up to inf
}

TEST(FloatConvert, F16RoundsToNearestEvenWithSubnormalsAndOverflow) {
  EXPECT_EQ(float_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_f16(1.0f + 0x1p-11f), 0x3c00);     // tie -> even
  EXPECT_EQ(float_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02); // tie -> even (up)
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);            // largest finite
  EXPECT_EQ(float_to_f16(65519.0f), 0x7bff);            // below the halfway point
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);            // tie -> even = infinity
  EXPECT_EQ(float_to_f16(-1e6f), 0xfc00);
  EXPECT_EQ(float_to_f16(0x1p-24f), 0x0001);     // smallest subnormal
  EXPECT_EQ(float_to_f16(0x1p-25f), 0x0000);     // tie -> even zero
  EXPECT_EQ(float_to_f16(0x1.8p-25f), 0x0001);   // above half: up
  EXPECT_EQ(float_to_f16(3 * 0x1p-25f), 0x0002); // 1.5 units: tie -> even (2)
  EXPECT_EQ(float_to_f16(0x1.ffcp-15f), 0x0400); // carries into the smallest normal
  EXPECT_EQ(float_to_f16(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(std::nanf("")))));
  EXPECT_EQ(f16_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(f16_to_float(0x8400), -0x1p-14f);
}

} // namespace
} // namespace kvactor::kernels
